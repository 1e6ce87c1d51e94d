#include "common/utf8.h"

#include <gtest/gtest.h>

namespace gangrun::common {
namespace {

const std::string kBad = "\xEF\xBF\xBD";  // U+FFFD

TEST(ValidUtf8Test, WellFormedTextIsKeptByteForByte) {
  const std::string text = "ascii, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF";
  EXPECT_EQ(ValidUtf8(text), text);
  EXPECT_EQ(ValidUtf8(""), "");
}

TEST(ValidUtf8Test, EveryByteOutsideAWellFormedSequenceBecomesAReplacement) {
  EXPECT_EQ(ValidUtf8("caf\xE9!"), "caf" + kBad + "!");                 // Latin-1
  EXPECT_EQ(ValidUtf8("\xFF\xFE"), kBad + kBad);                        // never in UTF-8
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), kBad + kBad);                        // overlong '/'
  EXPECT_EQ(ValidUtf8("\xE0\x80\xAF"), kBad + kBad + kBad);             // overlong, 3 bytes
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), kBad + kBad + kBad);             // a surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), kBad + kBad + kBad + kBad);  // past U+10FFFF
  EXPECT_EQ(ValidUtf8("\xE2\x82"), kBad + kBad);                        // cut short at the end
  EXPECT_EQ(ValidUtf8("\xE2\x82x"), kBad + kBad + "x");                 // cut short inside
  EXPECT_EQ(ValidUtf8("\x80x"), kBad + "x");                            // a lone continuation
}

}  // namespace
}  // namespace gangrun::common
