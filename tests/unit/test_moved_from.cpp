// What every filter kind promises once moved from (it may only be assigned to or
// destroyed: any other call is an invalid_argument naming the state, where it was a
// null dereference), and the calls whose answer array may not be null (a null one
// made add_new a plain add and remove_with_status a plain remove).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"
#include "gbf/scaling_filter.hpp"
#include "tests/support.hpp"

namespace {

using gbf::test::message_of;
using gbf::test::on_cpu;

const std::vector<std::uint64_t> keys = {1, 2, 3, 4, 5};

// Every call in `calls` on the moved-from object throws invalid_argument saying so;
// then a filter assigned to it works.
template <class Filter, class Make>
void expect_moved_from_contract(Make make, const std::vector<std::function<void(Filter&)>>& calls) {
  Filter source = make();
  Filter taken = std::move(source);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    SCOPED_TRACE("call " + std::to_string(i));
    const auto& call = calls[i];
    const std::string message = message_of([&] { call(source); });
    EXPECT_NE(message.find("this object was moved from"), std::string::npos) << message;
    EXPECT_THROW(call(source), gbf::invalid_argument);
  }
  source = make();
  source.add(keys.data(), keys.size());
  bool found[5] = {};
  source.contains(keys.data(), keys.size(), found);
  for (bool f : found) EXPECT_TRUE(f);
  taken.contains(keys.data(), keys.size(), found);  // the object moved to was never touched
  source = std::move(source);                        // self-move leaves it usable
  EXPECT_EQ(source.where(), gbf::backend::cpu);
}

TEST(MovedFrom, APlainFilterThrowsInvalidArgumentUntilAssigned) {
  bool found[5];
  expect_moved_from_contract<gbf::filter>(
      [] { return gbf::filter::create(100, 0.01, on_cpu()); },
      {[](gbf::filter& f) { (void)f.where(); }, [](gbf::filter& f) { f.add(keys.data(), keys.size()); },
       [&](gbf::filter& f) { f.contains(keys.data(), keys.size(), found); },
       [](gbf::filter& f) { (void)f.bits_set(); }, [](gbf::filter& f) { (void)f.stats(); },
       [](gbf::filter& f) { f.clear(); }, [](gbf::filter& f) { (void)gbf::serialize(f); },
       // These read only the (stale) layout: a size for nothing, and a Parquet
       // export that complained about the layout instead of the state.
       [](gbf::filter& f) { (void)gbf::serialized_size(f); },
       [](gbf::filter& f) { (void)gbf::to_parquet_sbbf(f); },
       [](gbf::filter& f) { gbf::save_parquet_sbbf(f, ::testing::TempDir() + "gbf_moved_from.sbbf"); },
       [](gbf::filter& f) {
         gbf::filter other = gbf::filter::create(100, 0.01, on_cpu());
         other.merge(f);
       },
       [](gbf::filter& f) { (void)f.copy_to(gbf::backend::cpu); }});
}

TEST(MovedFrom, EveryOtherKindThrowsInvalidArgumentUntilAssigned) {
  bool found[5];
  expect_moved_from_contract<gbf::counting_filter>(
      [] { return gbf::counting_filter::create(100, 0.01, on_cpu()); },
      {[](gbf::counting_filter& f) { (void)f.where(); },
       [](gbf::counting_filter& f) { f.add(keys.data(), keys.size()); },
       [](gbf::counting_filter& f) { (void)f.remove(keys.data(), keys.size()); },
       [&](gbf::counting_filter& f) { f.contains(keys.data(), keys.size(), found); },
       [](gbf::counting_filter& f) { (void)f.stats(); },
       [](gbf::counting_filter& f) { (void)gbf::serialized_size(f); }});
  expect_moved_from_contract<gbf::scaling_filter>(
      [] { return gbf::scaling_filter::create(100, 0.01, {}, on_cpu()); },
      {[](gbf::scaling_filter& f) { (void)f.where(); },
       [](gbf::scaling_filter& f) { f.add(keys.data(), keys.size()); },
       [&](gbf::scaling_filter& f) { f.contains(keys.data(), keys.size(), found); },
       [](gbf::scaling_filter& f) { (void)f.stats(); },
       // The chain's writers read only its levels (empty once moved from): they
       // wrote a 0-level file no loader takes, and a merge from it did nothing.
       [](gbf::scaling_filter& f) { (void)gbf::serialize(f); },
       [](gbf::scaling_filter& f) { (void)gbf::serialized_size(f); },
       [](gbf::scaling_filter& f) {
         gbf::scaling_filter live = gbf::scaling_filter::create(100, 0.01, {}, on_cpu());
         live.merge(f);
       },
       [](gbf::scaling_filter& f) { f.merge(gbf::scaling_filter::create(100, 0.01, {}, on_cpu())); }});
  expect_moved_from_contract<gbf::cuckoo_filter>(
      [] { return gbf::cuckoo_filter::create(100, 0.01, on_cpu()); },
      {[](gbf::cuckoo_filter& f) { (void)f.where(); },
       [](gbf::cuckoo_filter& f) { (void)f.add(keys.data(), keys.size()); },
       [&](gbf::cuckoo_filter& f) { f.contains(keys.data(), keys.size(), found); },
       [](gbf::cuckoo_filter& f) { (void)f.stats(); },
       [](gbf::cuckoo_filter& f) { (void)gbf::serialized_size(f); }});
}

// save() of a moved-from filter must not replace a good file (it is atomic, so
// the empty chain's file would have replaced it whole).
TEST(MovedFrom, SavingOneLeavesTheFileAtThePathAsItWas) {
  const std::string path = ::testing::TempDir() + "gbf_moved_from_save.gbf";
  auto expect_file_kept = [&](const auto& save_moved_from) {
    gbf::scaling_filter good = gbf::scaling_filter::create(100, 0.01, {}, on_cpu());
    good.add(keys.data(), keys.size());
    gbf::save(good, path);
    const std::vector<std::uint8_t> before = gbf::serialize(good);
    EXPECT_THROW(save_moved_from(), gbf::invalid_argument);
    const gbf::scaling_filter back = gbf::load_scaling_filter(path);
    EXPECT_EQ(gbf::serialize(back), before);
  };
  // Saves what is left of make()'s filter once moved from.
  const auto save_moved_from = [&](auto make) {
    return [&path, make] {
      auto source = make();
      auto taken = std::move(source);
      gbf::save(source, path);
    };
  };
  expect_file_kept(save_moved_from([] { return gbf::scaling_filter::create(100, 0.01, {}, on_cpu()); }));
  expect_file_kept(save_moved_from([] { return gbf::counting_filter::create(100, 0.01, on_cpu()); }));
  expect_file_kept(save_moved_from([] { return gbf::cuckoo_filter::create(100, 0.01, on_cpu()); }));
  expect_file_kept(save_moved_from([] { return gbf::filter::create(100, 0.01, on_cpu()); }));
  std::remove(path.c_str());
}

TEST(AnswerArrays, AddNewAndRemoveWithStatusRefuseANullArrayAndChangeNothing) {
  gbf::filter plain = gbf::filter::create(100, 0.01, on_cpu());
  EXPECT_NE(message_of([&] { plain.add_new(keys.data(), keys.size(), nullptr); }).find("add_new: result array is null"),
            std::string::npos);
  EXPECT_EQ(plain.bits_set(), 0u);
  plain.add_new(keys.data(), 0, nullptr);  // no keys, no answers: nothing to refuse

  gbf::scaling_filter chain = gbf::scaling_filter::create(100, 0.01, {}, on_cpu());
  EXPECT_THROW(chain.add_new(keys.data(), keys.size(), nullptr), gbf::invalid_argument);
  EXPECT_EQ(chain.keys_inserted(), 0u);

  gbf::counting_filter counting = gbf::counting_filter::create(100, 0.01, on_cpu());
  counting.add(keys.data(), keys.size());
  EXPECT_NE(message_of([&] { counting.remove_with_status(keys.data(), keys.size(), nullptr); })
                .find("remove_with_status: result array is null"),
            std::string::npos);
  bool found[5] = {};
  counting.contains(keys.data(), keys.size(), found);
  for (bool f : found) EXPECT_TRUE(f);
}

}  // namespace
