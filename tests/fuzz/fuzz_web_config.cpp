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
  if (!config) {
    FUZZ_CHECK(!config.error().message.empty());
    return 0;
  }
  for (const auto& [user, hash] : config->basic_auth_users) FUZZ_CHECK(is_bcrypt_hash(hash));
  if (config->tls) FUZZ_CHECK(config->tls->min_version <= config->tls->max_version);
  (void)is_bcrypt_hash(text);
  return 0;
}
