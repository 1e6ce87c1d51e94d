#pragma once
// TORCHELASTIC_ERROR_FILE: where torch's @record (torch.distributed.elastic.multiprocessing.
// errors) writes the exception that ended a worker, as JSON:
//   {"message": {"message": "RuntimeError: boom",
//                "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000000"}}}
// (or "message" as a plain string). The node reads it when the worker fails and ships the
// message and the last lines of the traceback with the exit, bounded.

#include <optional>
#include <string>

#include "gangrun/v1/session.pb.h"

namespace gangrun::node {

inline constexpr size_t kMaxErrorFileBytes = 1 << 20;  // a larger file is named, not read
inline constexpr size_t kMaxErrorMessageBytes = 2048;
inline constexpr int kMaxTracebackLines = 16;
inline constexpr size_t kMaxTracebackLineBytes = 512;

// nullopt when there is no such file (the worker did not use @record) or it is empty.
std::optional<v1::WorkerError> ReadWorkerError(const std::string& path);

// The same from the file's text (tests).
v1::WorkerError ParseWorkerError(const std::string& text);

}  // namespace gangrun::node
