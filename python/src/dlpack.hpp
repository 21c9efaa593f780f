// The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html): the structs a
// __dlpack__() capsule points to, unversioned ("dltensor") and versioned
// ("dltensor_versioned", DLPack >= 1.0), declared here so that the binding needs no
// DLPack header.
#pragma once

#include <cstdint>

namespace gbf::python::dlpack {

enum device_type : std::int32_t { cpu = 1, cuda = 2, cuda_host = 3, cuda_managed = 13 };
enum type_code : std::uint8_t { int_code = 0, uint_code = 1, float_code = 2, bool_code = 6 };

struct device {
  std::int32_t device_type;
  std::int32_t device_id;
};

struct data_type {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct tensor {
  void* data;
  device dev;
  std::int32_t ndim;
  data_type dtype;
  std::int64_t* shape;
  std::int64_t* strides;  ///< In elements; null means C-contiguous.
  std::uint64_t byte_offset;
};

struct managed_tensor {
  tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(managed_tensor* self);
};

struct version {
  std::uint32_t major;
  std::uint32_t minor;
};

inline constexpr std::uint64_t flag_read_only = 1;

struct managed_tensor_versioned {
  version ver;
  void* manager_ctx;
  void (*deleter)(managed_tensor_versioned* self);
  std::uint64_t flags;
  tensor dl_tensor;
};

}  // namespace gbf::python::dlpack
