// gbf's version, semantic versioning. The one place it is written: CMake's
// project(VERSION) reads these lines, and a test holds the Python package's
// metadata to them.
#pragma once

#define GBF_VERSION_MAJOR 0
#define GBF_VERSION_MINOR 1
#define GBF_VERSION_PATCH 0

#define GBF_VERSION_TEXT_(x) #x
#define GBF_VERSION_TEXT(x) GBF_VERSION_TEXT_(x)
/// "MAJOR.MINOR.PATCH" of these headers.
#define GBF_VERSION_STRING                                                          \
  GBF_VERSION_TEXT(GBF_VERSION_MAJOR) "." GBF_VERSION_TEXT(GBF_VERSION_MINOR) "." \
  GBF_VERSION_TEXT(GBF_VERSION_PATCH)

namespace gbf {

/// The version of the gbf library linked in, "MAJOR.MINOR.PATCH" (GBF_VERSION_STRING
/// is the headers' version: the two differ only for a stale build).
const char* library_version() noexcept;

/// Whether the library linked in was built with its CUDA backend (query_gpu()
/// says whether a GPU is there to use it).
bool library_has_cuda() noexcept;

}  // namespace gbf
