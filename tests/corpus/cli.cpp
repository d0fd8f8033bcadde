// postbox-corpus-cli: runs the core's extern "C" entries natively, for the decision corpus.
//
//   postbox-corpus-cli <family> [file]   one document from `file` (or stdin); the result bytes go
//                                        to stdout; exit status = the entry's return (0 or 1)
//   postbox-corpus-cli --batch           records on stdin, results on stdout, until EOF:
//       in:  u32le family-name length, family name, u32le input length, input bytes
//       out: u32le return code, u32le result length, result bytes
//     An unknown family gives return code 255 and an empty result.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "postbox/abi.h"
#include "postbox/abi_entries.h"

namespace {

using postbox::Entry;
using postbox::kEntries;
using Named = postbox::NamedEntry;

Entry find_entry(std::string_view name) {
  for (const Named& e : kEntries) {
    if (name == e.name) return e.entry;
  }
  return nullptr;
}

// Calls an entry the way the shim does: pb_alloc, copy, call, read the result.
int32_t call(Entry entry, const std::string& input, std::string& out) {
  const auto len = static_cast<int32_t>(input.size());
  char* buffer = static_cast<char*>(pb_alloc(len));
  if (buffer == nullptr) return -1;
  if (!input.empty()) std::memcpy(buffer, input.data(), input.size());
  const int32_t rc = entry(buffer, len);
  out.assign(pb_result_ptr(), static_cast<size_t>(pb_result_len()));
  pb_free(buffer);
  return rc;
}

bool read_exact(std::FILE* f, void* dst, size_t n) { return n == 0 || std::fread(dst, 1, n, f) == n; }

bool read_u32(std::FILE* f, uint32_t& v) {
  unsigned char b[4];
  if (!read_exact(f, b, 4)) return false;
  v = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  return true;
}

void write_u32(uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
  std::fwrite(b, 1, 4, stdout);
}

std::string read_all(std::FILE* f) {
  std::string data;
  char chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) data.append(chunk, n);
  return data;
}

int batch() {
  std::string name, input, out;
  for (;;) {
    uint32_t name_len;
    if (!read_u32(stdin, name_len)) return 0;  // clean EOF
    uint32_t input_len;
    name.resize(name_len);
    if (!read_exact(stdin, name.data(), name_len) || !read_u32(stdin, input_len)) {
      std::fprintf(stderr, "postbox-corpus-cli: truncated record\n");
      return 2;
    }
    input.resize(input_len);
    if (!read_exact(stdin, input.data(), input_len)) {
      std::fprintf(stderr, "postbox-corpus-cli: truncated record\n");
      return 2;
    }
    const Entry entry = find_entry(name);
    int32_t rc = 255;
    out.clear();
    if (entry != nullptr) rc = call(entry, input, out);
    write_u32(static_cast<uint32_t>(rc));
    write_u32(static_cast<uint32_t>(out.size()));
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--batch") == 0) {
    const int rc = batch();
    std::fflush(stdout);
    return rc;
  }
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: postbox-corpus-cli <family> [file]\n       postbox-corpus-cli --batch\n");
    return 2;
  }
  const Entry entry = find_entry(argv[1]);
  if (entry == nullptr) {
    std::fprintf(stderr, "postbox-corpus-cli: unknown family '%s'\n", argv[1]);
    return 2;
  }
  std::FILE* in = stdin;
  if (argc == 3 && std::strcmp(argv[2], "-") != 0) {
    in = std::fopen(argv[2], "rb");
    if (in == nullptr) {
      std::perror(argv[2]);
      return 2;
    }
  }
  const std::string input = read_all(in);
  if (in != stdin) std::fclose(in);
  std::string out;
  const int32_t rc = call(entry, input, out);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return rc < 0 ? 2 : rc;
}
