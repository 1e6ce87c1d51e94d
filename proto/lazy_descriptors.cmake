# Run after protoc on one generated .pb.cc (cmake -DFILE=... -P lazy_descriptors.cmake): drops
# the static initializer that registers the file's descriptor at program start. protobuf
# registers it anyway at the first use of a descriptor of the file (AssignDescriptors calls
# AddDescriptors, dependencies first), so reflection, JSON and lookups by name after a first
# use work as before; a program that uses none (a launch) no longer parses ten descriptors
# before main: about 0.5 ms of every start (bench/README.md, issue #24).
file(READ "${FILE}" text)
set(pattern "\nPROTOBUF_ATTRIBUTE_INIT_PRIORITY2 static ::_pbi::AddDescriptorsRunner dynamic_init_dummy_")
string(FIND "${text}" "${pattern}" at)
if(at EQUAL -1)
  # Another protobuf than Debian 12's 3.21: look at what its generated code registers.
  message(FATAL_ERROR "${FILE}: no AddDescriptorsRunner line to drop (protobuf changed?)")
endif()
string(REPLACE "${pattern}" "\n// (registered on first use, proto/lazy_descriptors.cmake) // dynamic_init_dummy_" text "${text}")
file(WRITE "${FILE}" "${text}")
