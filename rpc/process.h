#pragma once
// Process-wide settings of the libraries under gRPC, made once at the start of main().

namespace gangrun::rpc {

// Turns off Abseil's mutex deadlock detection. Debian builds Abseil without NDEBUG, which
// leaves this debug-only diagnostic on: every gRPC mutex then costs a lock-order graph update
// and a sorted insert on first use (about a fifth of the scheduler's user-space CPU while
// 3,000 nodes join, by perf). Must run before the first mutex is locked.
void DisableDebugOnlyChecks();

}  // namespace gangrun::rpc
