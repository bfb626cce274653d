/* A plain C client of the drop-in library, built and run by tests/c_program.rs: it generates
 * greedily on a model folder and prints the sequence, and on the way checks error results,
 * null and destroyed handles, token streams and an unsupported function. */
#include "ort_genai_c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(expr)                                                              \
  do {                                                                           \
    OgaResult* result_ = (expr);                                                 \
    if (result_) {                                                               \
      fprintf(stderr, "error: %s: %s\n", #expr, OgaResultGetError(result_));     \
      OgaDestroyResult(result_);                                                 \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

/* Expects `expr` to fail; prints the message under `label`. */
static int expect_error(const char* label, OgaResult* result) {
  if (!result) {
    fprintf(stderr, "%s: expected an error, got success\n", label);
    return 1;
  }
  const char* message = OgaResultGetError(result);
  if (!message || !*message) {
    fprintf(stderr, "%s: error without a message\n", label);
    return 1;
  }
  printf("%s: %s\n", label, message);
  OgaDestroyResult(result);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL_DIR MAX_LENGTH IDS(comma-separated)\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  double max_length = atof(argv[2]);
  int32_t prompt[256];
  size_t prompt_len = 0;
  for (char* s = strtok(argv[3], ","); s && prompt_len < 256; s = strtok(NULL, ","))
    prompt[prompt_len++] = (int32_t)atoi(s);

  OgaModel* model = NULL;
  if (expect_error("bad-path", OgaCreateModel("/nonexistent/genai-bridge-model", &model))) return 1;
  if (expect_error("null-path", OgaCreateModel(NULL, &model))) return 1;
  OgaDestroyModel(NULL);
  OgaDestroyResult(NULL);
  OgaDestroyString(NULL);
  if (expect_error("unsupported", OgaCreateEngine(NULL, NULL))) return 1;

  CHECK(OgaCreateModel(dir, &model));
  OgaTokenizer* tokenizer = NULL;
  CHECK(OgaCreateTokenizer(model, &tokenizer));
  OgaGeneratorParams* params = NULL;
  CHECK(OgaCreateGeneratorParams(model, &params));
  CHECK(OgaGeneratorParamsSetSearchNumber(params, "max_length", max_length));
  if (expect_error("unknown-option", OgaGeneratorParamsSetSearchNumber(params, "no_such", 1)))
    return 1;

  OgaGenerator* generator = NULL;
  CHECK(OgaCreateGenerator(model, params, &generator));
  int32_t out_of_range = 1 << 30;
  if (expect_error("bad-token", OgaGenerator_AppendTokens(generator, &out_of_range, 1))) return 1;
  CHECK(OgaGenerator_AppendTokens(generator, prompt, prompt_len));

  OgaTokenizerStream* stream = NULL;
  CHECK(OgaCreateTokenizerStream(tokenizer, &stream));
  size_t streamed = 0;
  while (!OgaGenerator_IsDone(generator)) {
    CHECK(OgaGenerator_GenerateNextToken(generator));
    const int32_t* next = NULL;
    size_t next_count = 0;
    CHECK(OgaGenerator_GetNextTokens(generator, &next, &next_count));
    if (next_count != 1) {
      fprintf(stderr, "expected one next token, got %zu\n", next_count);
      return 1;
    }
    const char* piece = NULL;
    CHECK(OgaTokenizerStreamDecode(stream, next[0], &piece));
    streamed += strlen(piece);
  }

  size_t count = OgaGenerator_GetSequenceCount(generator, 0);
  const int32_t* sequence = OgaGenerator_GetSequenceData(generator, 0);
  printf("sequence:");
  for (size_t i = 0; i < count; i++) printf("%s%d", i ? "," : " ", sequence[i]);
  printf("\n");

  const char* text = NULL;
  CHECK(OgaTokenizerDecode(tokenizer, sequence, count, &text));
  printf("decoded-bytes: %zu streamed-bytes: %zu\n", strlen(text), streamed);
  OgaDestroyString(text);

  /* Handles used after destroy are errors, not crashes; a second destroy is ignored. */
  OgaDestroyGenerator(generator);
  if (!OgaGenerator_IsDone(generator)) {
    fprintf(stderr, "a destroyed generator must read as done\n");
    return 1;
  }
  if (expect_error("destroyed-generator", OgaGenerator_GenerateNextToken(generator))) return 1;
  OgaDestroyGenerator(generator);

  OgaDestroyTokenizerStream(stream);
  OgaDestroyGeneratorParams(params);
  OgaDestroyTokenizer(tokenizer);
  OgaDestroyModel(model);
  OgaShutdown();
  printf("ok\n");
  return 0;
}
