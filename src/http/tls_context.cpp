#include "http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace gpumeter {

namespace {

std::string openssl_error(const std::string& what) {
  std::string out = what;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += out == what ? ": " : "; ";
    out += buf;
  }
  return out;
}

int openssl_version(TlsVersion v) {
  switch (v) {
    case TlsVersion::kTls10:
      return TLS1_VERSION;
    case TlsVersion::kTls11:
      return TLS1_1_VERSION;
    case TlsVersion::kTls12:
      return TLS1_2_VERSION;
    case TlsVersion::kTls13:
      return TLS1_3_VERSION;
  }
  return TLS1_2_VERSION;
}

// RequestClientCert and RequireAnyClientCert ask for a certificate but, as in Go, do not verify it.
int accept_any_certificate(int, X509_STORE_CTX*) { return 1; }

}  // namespace

Result<void> configure_tls_context(ssl_ctx_st* ctx, const TlsServerConfig& c) {
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, c.cert_file.c_str()) != 1) {
    return Error{0, openssl_error("cannot load cert_file " + c.cert_file)};
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return Error{0, openssl_error("cannot load key_file " + c.key_file)};
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return Error{0, openssl_error("key_file " + c.key_file + " does not match cert_file " + c.cert_file)};
  }

  SSL_CTX_set_min_proto_version(ctx, openssl_version(c.min_version));
  SSL_CTX_set_max_proto_version(ctx, openssl_version(c.max_version));
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (c.prefer_server_cipher_suites) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);

  // Go ignores TLS 1.3 names here (its TLS 1.3 suites are fixed); OpenSSL keeps its defaults for them too.
  std::string list;
  for (const std::string& name : c.cipher_suites) {
    const std::string openssl_name = OPENSSL_cipher_name(name.c_str());
    if (openssl_name == "(NONE)") return Error{0, "cipher suite " + name + " is not available in OpenSSL"};
    if (name.rfind("TLS_AES_", 0) == 0 || name.rfind("TLS_CHACHA20_", 0) == 0) continue;
    list += (list.empty() ? "" : ":") + openssl_name;
  }
  if (!list.empty() && SSL_CTX_set_cipher_list(ctx, list.c_str()) != 1) {
    return Error{0, openssl_error("cannot set cipher_suites " + list)};
  }
  if (!c.curve_preferences.empty()) {
    std::string groups;
    for (const auto& g : c.curve_preferences) groups += (groups.empty() ? "" : ":") + g;
    if (SSL_CTX_set1_groups_list(ctx, groups.c_str()) != 1) {
      return Error{0, openssl_error("cannot set curve_preferences " + groups)};
    }
  }

  if (!c.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, c.client_ca_file.c_str(), nullptr) != 1) {
      return Error{0, openssl_error("cannot load client_ca_file " + c.client_ca_file)};
    }
    // Lets clients pick the right certificate when they hold several.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(c.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx, names);
    }
  } else if (c.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
             c.client_auth == ClientAuth::kRequireAndVerifyClientCert) {
    SSL_CTX_set_default_verify_paths(ctx);  // Go verifies against the system roots in this case
  }

  switch (c.client_auth) {
    case ClientAuth::kNoClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      break;
    case ClientAuth::kRequestClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any_certificate);
      break;
    case ClientAuth::kRequireAnyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any_certificate);
      break;
    case ClientAuth::kVerifyClientCertIfGiven:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      break;
    case ClientAuth::kRequireAndVerifyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  return {};
}

}  // namespace gpumeter
