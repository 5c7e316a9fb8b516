#pragma once
// Test helper: a throwaway PKI made with the openssl command line in a temporary directory: a CA, a
// server certificate for 127.0.0.1/localhost and a client certificate signed by it, and a
// self-signed client certificate the CA does not vouch for. EC P-256 keys keep it fast.

#include <crypt.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace gpumeter::testing {

class TestCerts {
 public:
  TestCerts() {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpumeter-certs-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
    write("server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
    write("client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    ok_ = run("openssl req -x509 " + key + " -keyout ca.key -out ca.crt -days 2 -subj /CN=gpumeter-test-ca") &&
          run("openssl req " + key + " -keyout server.key -out server.csr -subj /CN=localhost") &&
          run("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
              "-extfile server.ext -out server.crt") &&
          run("openssl req " + key + " -keyout client.key -out client.csr -subj /CN=scraper") &&
          run("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
              "-extfile client.ext -out client.crt") &&
          run("openssl req -x509 " + key + " -keyout rogue.key -out rogue.crt -days 2 -subj /CN=rogue");
  }
  ~TestCerts() { std::filesystem::remove_all(dir_); }

  bool ok() const { return ok_; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  const std::filesystem::path& dir() const { return dir_; }

  void write(const std::string& name, const std::string& content) const {
    std::ofstream(dir_ / name, std::ios::binary) << content;
  }

 private:
  bool run(const std::string& cmd) const {
    return std::system(("cd '" + dir_.string() + "' && " + cmd + " >/dev/null 2>&1").c_str()) == 0;
  }

  std::filesystem::path dir_;
  bool ok_ = false;
};

// A bcrypt hash of `password` with the given prefix ("$2b$", "$2y$", ...), by default at the cheapest
// cost, so that tests stay fast; the cost does not change what is verified.
inline std::string bcrypt_hash(const std::string& password, const char* prefix = "$2b$", int cost = 4) {
  std::unique_ptr<char, decltype(&std::free)> salt(crypt_gensalt_ra(prefix, cost, nullptr, 0), &std::free);
  if (!salt) return "";
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof *data);
  const char* h = crypt_r(password.c_str(), salt.get(), data.get());
  return h && h[0] != '*' ? std::string(h) : std::string();
}

}  // namespace gpumeter::testing
