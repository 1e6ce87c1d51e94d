#pragma once
// Text for protobuf `string` fields from bytes a program wrote (log tails, error files, a health
// check's output): anything that is not UTF-8 would make the receiver refuse the whole message
// (a remote node's WorkerExited, and with it the node, was dropped as "a malformed event").

#include <string>

#include "absl/strings/string_view.h"

namespace gangrun::common {

// `bytes` with every byte that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points past U+10FFFF included) replaced by U+FFFD.
std::string ValidUtf8(absl::string_view bytes);

}  // namespace gangrun::common
