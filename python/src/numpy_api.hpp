// The NumPy C API, shared by the binding's files: module.cpp imports it once
// (GBF_NUMPY_IMPORT); the others see the same function table. The binding uses it
// to read arrays and to make result arrays without a Python call (per-call
// overhead: see docs/python.md).
#pragma once

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL gbf_python_numpy_api
#ifndef GBF_NUMPY_IMPORT
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
