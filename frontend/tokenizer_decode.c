/* Decoding ids into text, one id at a time. Only complete UTF-8 leaves the decoder: the bytes
 * of a character split across tokens wait for the rest, and each maximal ill-formed
 * subsequence becomes one U+FFFD, exactly as Rust's from_utf8_lossy over the whole byte string
 * (the reference's errors="replace"). */
#include "frontend/tokenizer_internal.h"

static const char kReplacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

void vlmc_tokenizer_decoder_init(vlmc_tokenizer_decoder_t *decoder,
                                 const vlmc_tokenizer_t *tokenizer, bool skip_special_tokens) {
  decoder->tokenizer = tokenizer;
  decoder->skip_special_tokens = skip_special_tokens;
  decoder->pending_len = 0;
  decoder->pending_need = 0;
}

static void feed_byte(vlmc_tokenizer_decoder_t *decoder, uint8_t byte, vlmc_strbuf_t *out) {
  if (decoder->pending_len > 0) {
    if (vlmc_tok_utf8_continuation_ok(decoder->pending[0], decoder->pending_len, byte)) {
      decoder->pending[decoder->pending_len++] = byte;
      if (decoder->pending_len == decoder->pending_need) {
        vlmc_strbuf_append(out, (const char *)decoder->pending, decoder->pending_len);
        decoder->pending_len = 0;
      }
      return;
    }
    /* The held bytes can never complete: they are one maximal subpart. The new byte starts
     * afresh. */
    vlmc_strbuf_puts(out, kReplacement);
    decoder->pending_len = 0;
  }
  size_t need = vlmc_tok_utf8_lead_length(byte);
  if (need == 1) {
    vlmc_strbuf_putc(out, (char)byte);
  } else if (need == 0) {
    vlmc_strbuf_puts(out, kReplacement);
  } else {
    decoder->pending[0] = byte;
    decoder->pending_len = 1;
    decoder->pending_need = (uint8_t)need;
  }
}

vlmc_status_t vlmc_tokenizer_decoder_push(vlmc_tokenizer_decoder_t *decoder, int32_t id,
                                          vlmc_strbuf_t *out) {
  const vlmc_tokenizer_t *tokenizer = decoder->tokenizer;
  if (id < 0 || (size_t)id >= tokenizer->entry_count ||
      tokenizer->entries[id].kind == VLMC_TOK_ENTRY_HOLE)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: token id %d names no token (ids are below %zu)",
                            tokenizer->name, (int)id, tokenizer->entry_count);
  const vlmc_tok_entry_t *entry = &tokenizer->entries[id];
  if (decoder->skip_special_tokens && entry->kind == VLMC_TOK_ENTRY_SPECIAL) return NULL;
  for (uint32_t i = 0; i < entry->bytes_len; ++i) feed_byte(decoder, entry->bytes[i], out);
  return NULL;
}

void vlmc_tokenizer_decoder_finish(vlmc_tokenizer_decoder_t *decoder, vlmc_strbuf_t *out) {
  if (decoder->pending_len > 0) vlmc_strbuf_puts(out, kReplacement);
  decoder->pending_len = 0;
}

vlmc_status_t vlmc_tokenizer_decode(const vlmc_tokenizer_t *tokenizer, const int32_t *ids,
                                    size_t count, bool skip_special_tokens, vlmc_strbuf_t *out) {
  vlmc_tokenizer_decoder_t decoder;
  vlmc_tokenizer_decoder_init(&decoder, tokenizer, skip_special_tokens);
  for (size_t i = 0; i < count; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_status_annotate(vlmc_tokenizer_decoder_push(&decoder, ids[i], out),
                                              "ids[%zu]: ", i));
  vlmc_tokenizer_decoder_finish(&decoder, out);
  return NULL;
}
