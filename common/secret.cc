#include "common/secret.h"

#include <openssl/crypto.h>

namespace gangrun::common {

bool SecretsEqual(std::string_view a, std::string_view b) {
  // The length is not secret: every guess is compared against the one known token.
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace gangrun::common
