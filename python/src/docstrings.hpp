// Docstrings of gbf._core.FilterBase's methods, which gbf.Filter inherits (so they are
// what help(gbf.Filter.contains) shows). Units and errors are stated in each.
#pragma once

namespace gbf::python::docs {

inline constexpr const char* keys_note =
    "keys: a batch (NumPy integer array, Arrow array or chunked array, CUDA array, list)\n"
    "    or one key (int, str, bytes, NumPy scalar); see help(gbf.Filter) for what is read\n"
    "    in place and what is copied.\n"
    "stream: device keys only: the CUDA stream the work runs on (an int cudaStream_t, 0 or\n"
    "    1 = legacy default, 2 = per-thread default; a cupy.cuda.Stream, torch.cuda.Stream or\n"
    "    any object with __cuda_stream__). Default: the current stream of the keys' framework\n"
    "    (torch.cuda.current_stream(), cupy.cuda.get_current_stream()), else the stream in the\n"
    "    array's __cuda_array_interface__, else the legacy default stream.\n"
    "Raises TypeError (not keys), ValueError (keys gbf cannot hash, e.g. a 2-D array),\n"
    "gbf.InvalidArgument (the library's checks: string offsets, device keys on a CPU filter).";

inline constexpr const char* add =
    "Adds the keys (null Arrow keys are skipped). Host batches run in chunks of\n"
    "chunk_keys keys with the GIL released; Ctrl-C raises KeyboardInterrupt at the next\n"
    "chunk boundary, the chunks before it added. Device keys: stream-ordered (returns\n"
    "before the GPU finishes; see synchronize()).\n\n";

inline constexpr const char* add_new =
    "Returns numpy.ndarray[bool] | bool | device array.\n\n"
    "Adds the keys and answers, per key, whether it was absent before it was added, in\n"
    "batch order: a key repeated in the batch is new only the first time (RedisBloom\n"
    "BF.MADD). Null keys answer False. One key in -> a bool out.\n"
    "out: a writable C-contiguous bool/uint8 array of len(keys) to write the answers to\n"
    "(host or device, like the keys); ValueError if it does not fit.\n\n";

inline constexpr const char* contains =
    "Returns numpy.ndarray[bool], a bitmap, a pyarrow.BooleanArray, a bool or a device array.\n\n"
    "Whether each key may be present (False: definitely absent; True: present or a false\n"
    "positive, at about the filter's estimated_fpr). Null keys answer False.\n"
    "format: 'numpy' (a bool array, one byte per key), 'bitmap' (a uint8 array of\n"
    "ceil(n/8) bytes, bit i of byte i//8 LSB first, as Arrow's bitmaps and the CLI's\n"
    "--out-format bitmap) or 'arrow' (a pyarrow.BooleanArray; needs pyarrow). One key in\n"
    "-> a bool out. Device keys -> a device bool array (CuPy for CuPy keys, torch for torch\n"
    "keys, else an object with __dlpack__), stream-ordered.\n"
    "out: as in add_new (format='numpy' only).\n\n";

inline constexpr const char* count =
    "Returns int.\n\n"
    "How many of the keys may be present (nulls not counted); the sum of contains(keys)\n"
    "without the answer array. Device keys: waits for the stream.\n\n";

inline constexpr const char* select =
    "Returns numpy.ndarray[int64] | device array.\n\n"
    "Join prefilter (semi-join reduction): the row numbers, ascending, of the keys that\n"
    "may be present; rows not listed are definitely absent (nulls are never listed).\n"
    "For an Arrow chunked array, rows count across chunks. Device keys -> a device int64\n"
    "array (waits for the stream).\n\n";

inline constexpr const char* contains_one =
    "key in filter: whether one key (int, str, bytes or NumPy scalar) may be present.\n"
    "A Python int is a 64-bit key: to probe a filter of int32 keys use numpy.int32(k).\n"
    "TypeError for a batch (use contains()).";

inline constexpr const char* merge =
    "self |= other: the union (every key of either is found).\n"
    "Raises gbf.LayoutMismatch (naming the fields that differ) unless the layouts are equal.";

inline constexpr const char* intersect =
    "self &= other: the intersection (a key of both is found;\n"
    "false positives of both remain possible). Raises gbf.LayoutMismatch.\n"
    "stats().estimated_keys of the result overstates the common keys; estimate them as\n"
    "a.stats().estimated_keys + b.stats().estimated_keys - (a | b).stats().estimated_keys.";

inline constexpr const char* symmetric_difference =
    "self ^= other (Hadoop's xor): the bits set in exactly one. Not a filter of\n"
    "either key set: the delta between two versions of a filter (v1 ^ (v1 ^ v2) == v2).\n"
    "Resets keys_added. Raises gbf.LayoutMismatch.";

inline constexpr const char* clear =
    "Sets every bit to zero; keeps layout and capacity, resets keys_added.";

inline constexpr const char* synchronize =
    "Waits for this filter's stream-ordered device work (device add /\n"
    "contains) and releases the device arrays kept alive for it; raises\n"
    "gbf.InvalidArgument if a device string batch had bad offsets. No-op on the CPU.";

inline constexpr const char* words =
    "Returns numpy.ndarray[uint32]: A copy of the bit array: num_blocks * W words, word i\n"
    "of block b at b * W + i (docs/layout.md).";

inline constexpr const char* backend =
    "'cpu' or 'gpu': where the bits live and every batch runs (never 'auto'; a filter\n"
    "does not move between backends: copy(backend=...) makes a copy on another one).";

inline constexpr const char* requested_backend =
    "The backend asked for: 'auto', 'cpu' or 'gpu' (copies and pickles ask for it again).";

inline constexpr const char* backend_description =
    "One line naming the backend and, for backend='auto', why it was chosen (the GPU\n"
    "when one is usable and its memory can hold the filter, else the CPU), e.g.\n"
    "'cpu (avx2, 2 threads); auto: no GPU (...)'.";

inline constexpr const char* chunk_keys =
    "Keys per chunk of a host batch (GIL released per chunk, Ctrl-C checked between\n"
    "chunks). Default 4 Mi keys (2**22) on the CPU, 32 Mi (2**25) on a GPU; rounded up to\n"
    "a multiple of 8. Answers do not depend on it.";

}  // namespace gbf::python::docs
