#pragma once
// The kernel's log since a generation started on this host, as evidence of a failing device:
// a rank's failure after "NVRM: Xid (PCI:...)" or an uncorrectable ECC error in the kernel's
// log is its hardware's, which the scheduler's restart rules (scheduler/restart_rules.h) tell
// from the job's own failures. Each failed rank's WorkerExited carries these lines.
//
// Reads either /dev/kmsg (records "PRI,SEQ,USEC,FLAGS;MESSAGE", one per read(2); only those
// of priority warning or worse are kept) or a text file the kernel's log is appended to (a
// container without /dev/kmsg, its host's kern.log bound in), every appended line kept. A log
// that cannot be opened (kernel.dmesg_restrict for a user without CAP_SYSLOG, no such file)
// gives nothing, with one debug line. Never blocks. Not thread-safe: the node's strand.

#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace gangrun::node {

class KernelLog {
 public:
  // Bounds: the last kMaxLines lines since the mark are kept, each cut to kMaxLineBytes; one
  // Since() reads at most kMaxReadBytes (what is beyond is read by the next).
  static constexpr size_t kMaxLines = 16;
  static constexpr size_t kMaxLineBytes = 512;
  static constexpr size_t kMaxReadBytes = 1 << 20;

  // `path`: /dev/kmsg, a text file, or "" (none: Since() is always empty).
  explicit KernelLog(std::string path) : path_(std::move(path)) {}
  ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;

  // Opens the log, if it is not open yet (Mark does too): a node opens it while it waits for
  // its first generation, off the launch's path.
  void Open();
  // From now on: what the log held before is not this generation's.
  void Mark();
  // The lines logged since the mark (the last kMaxLines of them), oldest first.
  std::vector<std::string> Since();

  // /dev/kmsg's record: its message if its priority is warning or worse, else "".
  static std::string KmsgMessage(std::string_view record);

 private:
  void Keep(std::string_view line);
  void ReadKmsg();
  void ReadText();

  std::string path_;
  int fd_ = -1;
  bool kmsg_ = false;
  bool warned_ = false;
  std::string partial_;  // a text file's last line, until its newline comes
  std::deque<std::string> lines_;
};

}  // namespace gangrun::node
