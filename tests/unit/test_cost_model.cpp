// cost_model: the built-in model is valid, save/load round-trips, every kind of
// bad file is refused with its line named, lookup picks the nearest filter size
// in log scale, and the automatic backend's loader falls back to the defaults.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iterator>
#include <locale>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "gbf/cost_model.hpp"
#include "gbf/error.hpp"

namespace {

namespace fs = std::filesystem;

class CostModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gbf_cost_model_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  fs::path dir_;
};

/// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

gbf::cost_model random_model(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(-7, 10);
  auto value = [&] { return std::pow(10.0, exponent(rng)); };
  gbf::cost_model m;
  std::uint64_t bytes = 1024;
  for (int i = 0; i < 1 + static_cast<int>(rng() % 5); ++i) {
    gbf::cost_point p;
    bytes += 1 + rng() % (std::uint64_t{1} << 34);
    p.filter_bytes = bytes;
    for (gbf::call_cost* c : {&p.cpu_add, &p.cpu_probe, &p.gpu_add, &p.gpu_probe})
      *c = {value() * 1e-9, value(), value()};
    m.points.push_back(p);
  }
  m.copy = {value() * 1e-9, value()};
  return m;
}

void expect_near_relative(double a, double b) { EXPECT_NEAR(a, b, std::fabs(b) * 1e-8) << a << " vs " << b; }

TEST_F(CostModel, DefaultsAreValidAndCostMoreOnTheCpuForBigFilters) {
  const gbf::cost_model m = gbf::cost_model::defaults();
  EXPECT_EQ(m.problem(), "");
  EXPECT_EQ(m.source, "built-in defaults");
  const gbf::cost_point& small = m.at(1 << 20);
  const gbf::cost_point& big = m.at(std::uint64_t{1} << 32);
  EXPECT_LT(small.cpu_probe.seconds(1e6), big.cpu_probe.seconds(1e6));
  // The point of the model: tiny batches are cheaper on the CPU, huge ones on the GPU.
  EXPECT_LT(big.cpu_probe.seconds(10), big.gpu_probe.seconds(10));
  EXPECT_GT(big.cpu_probe.seconds(1e8), big.gpu_probe.seconds(1e8));
}

TEST_F(CostModel, SaveThenLoadGivesTheSameModel) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const gbf::cost_model m = random_model(seed);
    ASSERT_EQ(m.problem(), "");
    const std::string path = (dir_ / "nested" / "dirs" / "model").string();  // parents created
    m.save(path, "fitted by a test\nsecond line");
    const gbf::cost_model back = gbf::cost_model::load(path);
    EXPECT_EQ(back.source, path);
    ASSERT_EQ(back.points.size(), m.points.size());
    for (std::size_t i = 0; i < m.points.size(); ++i) {
      EXPECT_EQ(back.points[i].filter_bytes, m.points[i].filter_bytes);
      const gbf::call_cost* a[] = {&m.points[i].cpu_add, &m.points[i].cpu_probe, &m.points[i].gpu_add,
                                   &m.points[i].gpu_probe};
      const gbf::call_cost* b[] = {&back.points[i].cpu_add, &back.points[i].cpu_probe,
                                   &back.points[i].gpu_add, &back.points[i].gpu_probe};
      for (int c = 0; c < 4; ++c) {
        expect_near_relative(b[c]->fixed_s, a[c]->fixed_s);
        expect_near_relative(b[c]->keys_per_s, a[c]->keys_per_s);
        expect_near_relative(b[c]->bytes_per_s, a[c]->bytes_per_s);
      }
    }
    expect_near_relative(back.copy.fixed_s, m.copy.fixed_s);
    expect_near_relative(back.copy.bytes_per_s, m.copy.bytes_per_s);
  }
}

TEST_F(CostModel, LookupTakesTheNearestPointInLogScale) {
  gbf::cost_model m = gbf::cost_model::defaults();
  m.points[0].filter_bytes = 1 << 20;   // 1 MiB
  m.points[1].filter_bytes = 1 << 30;   // 1 GiB; the log midpoint is 32 MiB
  EXPECT_EQ(m.at(1).filter_bytes, 1u << 20);
  EXPECT_EQ(m.at(31u << 20).filter_bytes, 1u << 20);
  EXPECT_EQ(m.at(33u << 20).filter_bytes, 1u << 30);
  EXPECT_EQ(m.at(std::uint64_t{1} << 40).filter_bytes, 1u << 30);
}

TEST_F(CostModel, SavingAnInvalidModelThrowsAndWritesNothing) {
  gbf::cost_model m = gbf::cost_model::defaults();
  m.points[1].gpu_add.keys_per_s = 0;
  const std::string path = (dir_ / "model").string();
  try {
    m.save(path);
    FAIL() << "saved an invalid model";
  } catch (const gbf::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("points[1].gpu_add.keys_per_s"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
  m = gbf::cost_model::defaults();
  m.points.clear();
  EXPECT_THROW(m.save(path), gbf::invalid_argument);
  m = gbf::cost_model::defaults();
  std::swap(m.points[0], m.points[1]);
  EXPECT_THROW(m.save(path), gbf::invalid_argument);
}

TEST_F(CostModel, BadFilesAreRefusedNamingTheProblem) {
  const std::string good_point = "point 1048576 1e-6 1e8 1e9 1e-6 1e8 1e9 4e-5 1e9 1e10 5e-5 1e9 1e10\n";
  const struct {
    const char* name;
    std::string text;
    const char* expected;
  } cases[] = {
      {"empty", "", "empty file"},
      {"comments only", "# nothing\n\n", "empty file"},
      {"wrong magic", "gbf-filter 1\n", "line 1: not a gbf cost model"},
      {"wrong version", "gbf-cost-model 2\n", "line 1: unsupported version 2"},
      {"unknown record", "gbf-cost-model 1\ncopy 1e-5 1e10\nspeed 3\n", "line 3: unknown record 'speed'"},
      {"missing number", "gbf-cost-model 1\ncopy 1e-5\n", "line 2: expected a number for copy bytes_per_s"},
      {"not a number", "gbf-cost-model 1\ncopy 1e-5 fast\n", "line 2: expected a number for copy bytes_per_s"},
      {"trailing token", "gbf-cost-model 1\ncopy 1e-5 1e10 x\n", "line 2: unexpected 'x'"},
      {"short point", "gbf-cost-model 1\ncopy 1e-5 1e10\npoint 1024 1 2 3\n",
       "line 3: expected a number for cpu_probe fixed_s"},
      {"fractional size", "gbf-cost-model 1\ncopy 1e-5 1e10\npoint 10.5 1 1 1 1 1 1 1 1 1 1 1 1\n",
       "filter_bytes must be a whole number"},
      {"no copy", "gbf-cost-model 1\n" + good_point, "no 'copy' record"},
      {"no point", "gbf-cost-model 1\ncopy 1e-5 1e10\n", "no cost points"},
      {"duplicate point", "gbf-cost-model 1\ncopy 1e-5 1e10\n" + good_point + good_point,
       "points[1].filter_bytes is not above"},
      {"zero rate", "gbf-cost-model 1\ncopy 1e-5 1e10\npoint 1024 1e-6 0 1e9 1e-6 1e8 1e9 4e-5 1e9 1e10 5e-5 1e9 1e10\n",
       "points[0].cpu_add.keys_per_s is not a finite number > 0"},
      {"infinite copy rate", "gbf-cost-model 1\ncopy 0 inf\n" + good_point,
       "copy.bytes_per_s is not a finite number > 0"},
      {"negative size", "gbf-cost-model 1\ncopy 1e-5 1e10\npoint -5 1 1 1 1 1 1 1 1 1 1 1 1\n",
       "filter_bytes must be a whole number"},
      {"negative copy", "gbf-cost-model 1\ncopy -1 1e10\n" + good_point, "copy.fixed_s"},
      {"nan", "gbf-cost-model 1\ncopy nan 1e10\n" + good_point, "copy.fixed_s"},
  };
  for (const auto& c : cases) {
    const std::string path = write("model", c.text);
    try {
      gbf::cost_model::load(path);
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const gbf::format_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << c.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << c.name << ": " << e.what();
    }
  }
  EXPECT_THROW(gbf::cost_model::load((dir_ / "absent").string()), gbf::io_error);
  // A good file loads, points in any order.
  const gbf::cost_model m = gbf::cost_model::load(
      write("good", "gbf-cost-model 1\n# fitted\ncopy 1e-5 1e10\n"
                    "point 1073741824 1e-6 4e7 2e9 1e-6 4e7 2e9 4e-5 1e9 1e10 5e-5 1e9 1e10\n" +
                        good_point));
  ASSERT_EQ(m.points.size(), 2u);
  EXPECT_EQ(m.points[0].filter_bytes, 1u << 20);
  EXPECT_EQ(m.points[1].cpu_add.keys_per_s, 4e7);
}

TEST_F(CostModel, AutomaticBackendReadsTheCacheFileOrFallsBackToDefaults) {
  const std::string path = (dir_ / "cache" / "cost-model").string();
  scoped_env env("GBF_COST_MODEL", path);
  EXPECT_EQ(gbf::cost_model::default_path(), path);
  EXPECT_EQ(gbf::cost_model::for_automatic_backend().source, "built-in defaults");  // no file yet

  gbf::cost_model fitted = gbf::cost_model::defaults();
  fitted.points[0].cpu_probe.keys_per_s = 123e6;
  fitted.save(path);
  const gbf::cost_model loaded = gbf::cost_model::for_automatic_backend();
  EXPECT_EQ(loaded.source, path);
  EXPECT_EQ(loaded.points[0].cpu_probe.keys_per_s, 123e6);

  write("cache/cost-model", "gbf-cost-model 9\n");
  const gbf::cost_model fallback = gbf::cost_model::for_automatic_backend();
  EXPECT_EQ(fallback.points.size(), gbf::cost_model::defaults().points.size());
  EXPECT_NE(fallback.source.find("built-in defaults ("), std::string::npos) << fallback.source;
  EXPECT_NE(fallback.source.find("unsupported version 9"), std::string::npos) << fallback.source;
}

/// A numpunct of decimal comma and dot-grouped thousands, as de_DE has (built in,
/// so the test needs no installed locale).
struct decimal_comma : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST_F(CostModel, TheFileIsTheSameUnderADecimalCommaLocale) {
  const gbf::cost_model m = random_model(99);
  const std::string plain_path = (dir_ / "plain").string();
  m.save(plain_path);
  const std::locale previous = std::locale::global(std::locale(std::locale::classic(), new decimal_comma));
  std::ostringstream probe;
  probe << 1048576 << " " << 1.5;
  const std::string local_path = (dir_ / "local").string();
  m.save(local_path);
  const gbf::cost_model back = gbf::cost_model::load(plain_path);
  std::locale::global(previous);
  EXPECT_EQ(probe.str(), "1.048.576 1,5");  // the locale is in force for streams
  std::ifstream a(plain_path), b(local_path);
  const std::string text_a((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
  const std::string text_b((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text_a, text_b);
  ASSERT_EQ(back.points.size(), m.points.size());
  EXPECT_EQ(back.points.back().filter_bytes, m.points.back().filter_bytes);
  EXPECT_EQ(back.copy.bytes_per_s, m.copy.bytes_per_s);  // to_chars / from_chars round-trip exactly
}

TEST_F(CostModel, DefaultPathFollowsXdgCacheHomeThenHome) {
  scoped_env no_override("GBF_COST_MODEL", "");
  {
    scoped_env xdg("XDG_CACHE_HOME", "/var/cache/me");
    EXPECT_EQ(gbf::cost_model::default_path(), "/var/cache/me/gbf/cost-model");
  }
  scoped_env xdg("XDG_CACHE_HOME", "");
  scoped_env home("HOME", "/home/me");
  EXPECT_EQ(gbf::cost_model::default_path(), "/home/me/.cache/gbf/cost-model");
}

}  // namespace
