#pragma once
// The process keeper: a small process, forked by the launcher before it starts any thread
// (`gangrun __keeper FD` when started from a program, as the tests do), that is the parent of
// every worker on this host.
//
// Why it exists: a parent-death signal reaches only direct children, so it cannot protect
// against the launcher being killed with SIGKILL while a worker's grandchild (which may
// have called setsid()) lives on. The keeper is a child subreaper: every orphan below it
// is re-parented to it, and when its socket to the launcher breaks (the launcher died,
// however) it kills and reaps everything below it and exits. Workers carry
// PR_SET_PDEATHSIG=SIGKILL towards the keeper, so the keeper's own death takes them along.
//
// It is single-threaded: a poll() loop over the launcher's socket and a signalfd for
// SIGCHLD. It reaps with waitpid(-1) because it owns all of its children and runs no other
// process library. Requests and events are gangrun.v1.KeeperRequest / KeeperEvent, one per
// SOCK_SEQPACKET packet.

namespace gangrun::node {

// Runs the keeper on `socket_fd` until the launcher goes away or asks it to shut down.
// Returns the process exit code.
int RunKeeper(int socket_fd);

}  // namespace gangrun::node
