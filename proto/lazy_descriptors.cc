// Every generated .pb.cc, ours and protobuf's own well-known types when protobuf is linked
// statically, registers its file's descriptor at program start with a static
// AddDescriptorsRunner: protobuf 3.21 parses each encoded FileDescriptorProto then, whether
// the program uses a descriptor or not. A launch uses none, and descriptor.proto, type.proto,
// wrappers.proto, any.proto and source_context.proto alone were 670 k instructions and ~16
// page faults before main (bench/README.md, issue #24).
//
// The link maps every reference to the runner's constructor to the function below
// (`--wrap`, proto/CMakeLists.txt), which does nothing: protobuf registers a file anyway at
// the first use of one of its descriptors (AssignDescriptors calls AddDescriptors, the file's
// dependencies first), so reflection, JSON and lookups by name after a first use work as
// before. What changes is a lookup by name of a file nothing has used yet: it finds nothing.
// gangrun makes none. LazyDescriptorsTest checks both halves in a fresh process.
//
// Two threads' first uses at once are safe: protobuf 3.21 registers a file only from
// AssignDescriptorsImpl, under a global mutex of its own (the static `mu` inside it, which
// `nm -C gangrun` shows), and a registered file's flag keeps it and its dependencies from being
// registered twice. Without the runner that mutex is the only way in.
//
// The symbol is the Itanium ABI name of
// google::protobuf::internal::AddDescriptorsRunner::AddDescriptorsRunner(const DescriptorTable*);
// a constructor takes `this` first. A protobuf that renames it leaves the references
// unwrapped (eager again, nothing breaks), and LazyDescriptorsTest fails.

extern "C" void
__wrap__ZN6google8protobuf8internal20AddDescriptorsRunnerC1EPKNS1_15DescriptorTableE(
    void* /*self*/, const void* /*table*/) {}
