// libhpctrain_spm.so: SentencePiece behind a C-linkage table, dlopen()ed by dataset/tokenizer.cpp
// with RTLD_DEEPBIND | RTLD_LOCAL.
//
// Why a separate module: Debian's libsentencepiece carries its own copy of protobuf-lite (3.14,
// every symbol exported), while libhpctrain links the system's libprotobuf-lite (3.21, for
// TensorBoard event files). Linked into one process normally, sentencepiece's generated code
// binds to the 3.21 runtime and aborts in its version check. Loaded with RTLD_DEEPBIND, this
// module and libsentencepiece resolve their symbols in their own scope first (its 3.14 copy),
// and RTLD_LOCAL keeps them out of everyone else's. Strings and vectors cross as pointers (one
// libstdc++ in the process); no exception crosses: errors come back as text.
#include <sentencepiece_processor.h>

#include <string>
#include <vector>

extern "C" {

__attribute__((visibility("default"))) void* hpctrain_spm_load(const std::string* model, std::string* error) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->LoadFromSerializedProto(*model);
  if (!status.ok()) {
    *error = status.ToString();
    delete sp;
    return nullptr;
  }
  return sp;
}

__attribute__((visibility("default"))) void hpctrain_spm_free(void* sp) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(sp);
}

__attribute__((visibility("default"))) int hpctrain_spm_pieces(void* sp) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(sp)->GetPieceSize();
}

__attribute__((visibility("default"))) bool hpctrain_spm_encode(void* sp, const std::string* text,
                                                                std::vector<int>* ids, std::string* error) {
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(sp)->Encode(*text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

__attribute__((visibility("default"))) bool hpctrain_spm_decode(void* sp, const std::vector<int>* ids,
                                                                std::string* text, std::string* error) {
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(sp)->Decode(*ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

}  // extern "C"
