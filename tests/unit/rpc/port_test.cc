// rpc/port.h without a server: what a connection's first bytes say it is, and the bounds
// before authentication as the file limit sets them.

#include "rpc/port.h"

#include <gtest/gtest.h>

#include <string>

namespace gangrun::rpc {
namespace {

TEST(SessionOpeningTest, TheFirstBytesSayWhatAConnectionIs) {
  EXPECT_EQ(ClassifyOpening(""), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("G"), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("GRS2"), Opening::kSession);
  EXPECT_EQ(ClassifyOpening("GRS1"), Opening::kSession);  // another version: told so
  EXPECT_EQ(ClassifyOpening(std::string("GRS2\0\0\0\2\1", 9)), Opening::kSession);
  EXPECT_EQ(ClassifyOpening("PRI * HTTP/2.0\r\n"), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Opening::kHttp2);
  EXPECT_EQ(ClassifyOpening("GET / HTTP/1.1\r\n"), Opening::kUnknown);
  EXPECT_EQ(ClassifyOpening("\x16\x03\x01\x02\x00"), Opening::kTls);  // a TLS ClientHello
  EXPECT_EQ(ClassifyOpening("\x16\x03"), Opening::kIncomplete);
  EXPECT_EQ(ClassifyOpening("\x16\x09\x01"), Opening::kUnknown);
  EXPECT_EQ(ClassifyOpening("GRX"), Opening::kUnknown);
}

TEST(PreAuthBoundsTest, BoundsFollowTheFileLimit) {
  EXPECT_EQ(Port::UnauthenticatedBound(1024), 128u);
  EXPECT_EQ(Port::UnauthenticatedBound(64), 16u);
  EXPECT_EQ(Port::UnauthenticatedBound(1 << 20), 1024u);
  EXPECT_EQ(Port::LobbyBound(1024), 256u);
  EXPECT_EQ(Port::LobbyBound(32), 16u);
  EXPECT_EQ(Port::LobbyBound(1 << 20), 16384u);
  EXPECT_EQ(Port::GrpcConnectionBound(1024), 512u);
  EXPECT_EQ(Port::GrpcConnectionBound(1 << 20), 16384u);
}

}  // namespace
}  // namespace gangrun::rpc
