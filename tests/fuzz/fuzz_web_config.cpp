// --web.config.file, the exporter-toolkit web configuration (TLS, basic auth, headers).
#include <string>

#include "fuzz_check.h"
#include "http/web_config.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  // A relative path: certificate paths resolve against its directory, which does not exist.
  const std::string path = "fuzz-web/web.yml";
  auto config = parse_web_config(text, path);
  auto again = parse_web_config(text, path);
  FUZZ_CHECK(config.ok() == again.ok());
  if (!config) {
    FUZZ_CHECK(!config.error().message.empty());
    FUZZ_CHECK(config.error().message == again.error().message);
    return 0;
  }
  for (const auto& [user, hash] : config->basic_auth_users) FUZZ_CHECK(is_bcrypt_hash(hash));
  if (config->tls) FUZZ_CHECK(config->tls->min_version <= config->tls->max_version);
  FUZZ_CHECK(config->headers == again->headers);
  (void)is_bcrypt_hash(text);
  return 0;
}
