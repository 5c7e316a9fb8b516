#pragma once
// Applies a TlsServerConfig to an OpenSSL server context: certificate and key, client certificate
// policy, protocol versions, TLS 1.2 cipher suites and curves.

#include "http/web_config.h"
#include "util/result.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX, kept out of this header

namespace gpumeter {

Result<void> configure_tls_context(ssl_ctx_st* ctx, const TlsServerConfig& config);

}  // namespace gpumeter
