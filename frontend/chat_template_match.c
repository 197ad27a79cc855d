/* Recognising the Qwen2-VL chat template by structure rather than by bytes.
 *
 * A template is lexed into literal text and tags with Jinja's whitespace rules as transformers
 * configures them (trim_blocks and lstrip_blocks on, "-" and "+" markers honoured), comments
 * are dropped, each tag's expression is re-spelled in one canonical form, and output tags
 * that concatenate string literals are split into literal text and expressions. Two templates
 * whose element lists are equal render the same text for every input. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/chat_template.h"

static const char kQwen2VlTemplate[] =
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const char *vlmc_chat_template_qwen2_vl_text(void) { return kQwen2VlTemplate; }

/* Qwen2-Instruct's template (tests/fixtures/chat_templates/qwen2_text.jinja). */
static const char kQwen2TextTemplate[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/* Qwen2.5-Instruct's template, tools branch and all (tests/fixtures/chat_templates/
 * qwen2_5_text.jinja): a text-only Qwen2 of the 2.5 generation carries it. */
static const char kQwen2_5TextTemplate[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}";

/* Qwen3-VL-Instruct's template (tests/fixtures/chat_templates/qwen3_vl.jinja: the 5,292 bytes
 * Qwen ships with Qwen3-VL-8B-Instruct, SHA-256 3636d0f0...a489e4), tools branch and all. */
static const char kQwen3VlTemplate[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {%- if messages[0].content is string %}\n"
    "            {{- messages[0].content }}\n"
    "        {%- else %}\n"
    "            {%- for content in messages[0].content %}\n"
    "                {%- if 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' }}\n"
    "        {%- if messages[0].content is string %}\n"
    "            {{- messages[0].content }}\n"
    "        {%- else %}\n"
    "            {%- for content in messages[0].content %}\n"
    "                {%- if 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set image_count = namespace(value=0) %}\n"
    "{%- set video_count = namespace(value=0) %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.role == \"user\" %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' }}\n"
    "        {%- if message.content is string %}\n"
    "            {{- message.content }}\n"
    "        {%- else %}\n"
    "            {%- for content in message.content %}\n"
    "                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n"
    "                    {%- set image_count.value = image_count.value + 1 %}\n"
    "                    {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}\n"
    "                    <|vision_start|><|image_pad|><|vision_end|>\n"
    "                {%- elif content.type == 'video' or 'video' in content %}\n"
    "                    {%- set video_count.value = video_count.value + 1 %}\n"
    "                    {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}\n"
    "                    <|vision_start|><|video_pad|><|vision_end|>\n"
    "                {%- elif 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' }}\n"
    "        {%- if message.content is string %}\n"
    "            {{- message.content }}\n"
    "        {%- else %}\n"
    "            {%- for content_item in message.content %}\n"
    "                {%- if 'text' in content_item %}\n"
    "                    {{- content_item.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and message.content) or (not loop.first) %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n"
    "                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n"
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {%- if message.content is string %}\n"
    "            {{- message.content }}\n"
    "        {%- else %}\n"
    "            {%- for content in message.content %}\n"
    "                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n"
    "                    {%- set image_count.value = image_count.value + 1 %}\n"
    "                    {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}\n"
    "                    <|vision_start|><|image_pad|><|vision_end|>\n"
    "                {%- elif content.type == 'video' or 'video' in content %}\n"
    "                    {%- set video_count.value = video_count.value + 1 %}\n"
    "                    {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}\n"
    "                    <|vision_start|><|video_pad|><|vision_end|>\n"
    "                {%- elif 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

/* Qwen3's template (tests/fixtures/chat_templates/qwen3_text.jinja): a text-only Qwen3's, with
 * tools and the thinking blocks. */
static const char kQwen3TextTemplate[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n"
    "        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {%- set content = message.content %}\n"
    "        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n"
    "        {%- else %}\n"
    "            {%- if '</think>' in message.content %}\n"
    "                {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}\n"
    "                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "            {%- endif %}\n"
    "        {%- endif %}\n"
    "        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {%- if loop.last or (not loop.last and reasoning_content) %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n"
    "            {%- else %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "            {%- endif %}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and content) or (not loop.first) %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n"
    "                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n"
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}";

/* ---- lexing into raw tokens ---- */

typedef enum { RAW_TEXT, RAW_OUTPUT, RAW_STATEMENT, RAW_COMMENT } raw_kind_t;

typedef struct {
  raw_kind_t kind;
  size_t begin, end; /* text, or the tag's inside without markers */
  size_t offset;     /* where the token starts in the source */
  char open_sign;    /* '-', '+' or 0 */
  char close_sign;
} raw_token_t;

typedef struct {
  raw_token_t *items;
  size_t count, capacity;
} raw_tokens_t;

/* One template element after whitespace handling and normalisation. */
typedef enum { ELEM_TEXT, ELEM_OUTPUT, ELEM_STATEMENT } elem_kind_t;

typedef struct {
  elem_kind_t kind;
  char *text; /* literal text, or the canonical spelling of the tag */
  size_t len;
  size_t offset;
} elem_t;

typedef struct {
  const char *source; /* for messages */
  const char *text;
  size_t len;
  raw_tokens_t raw;
  elem_t *elems;
  size_t elem_count, elem_capacity;
  /* Identifiers in source order, for naming the feature an unrecognised template uses. */
  char **idents;
  size_t *ident_offsets;
  size_t ident_count, ident_capacity;
  vlmc_arena_t arena;
} template_doc_t;

static vlmc_status_t doc_error(const template_doc_t *doc, vlmc_status_code_t code, size_t offset,
                               const char *fmt, ...) VLMC_PRINTF(4, 5);
static vlmc_status_t doc_error(const template_doc_t *doc, vlmc_status_code_t code, size_t offset,
                               const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t status = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  size_t line, col;
  vlmc_text_line_col(doc->text, offset, &line, &col);
  return vlmc_status_annotate(status, "%s:%zu:%zu: ", doc->source, line, col);
}

static bool grow_array(void **items, size_t *capacity, size_t need, size_t size) {
  if (need <= *capacity) return true;
  size_t count = *capacity ? *capacity * 2 : 32;
  while (count < need) count *= 2;
  void *grown = realloc(*items, count * size);
  if (!grown) return false;
  *items = grown;
  *capacity = count;
  return true;
}

static vlmc_status_t raw_push(template_doc_t *doc, raw_token_t token) {
  raw_tokens_t *raw = &doc->raw;
  if (!grow_array((void **)&raw->items, &raw->capacity, raw->count + 1, sizeof token))
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
  raw->items[raw->count++] = token;
  return NULL;
}

/* The next "{{", "{%" or "{#" at or after `from`; len when none. */
static size_t find_tag_start(const char *text, size_t len, size_t from) {
  for (size_t i = from; i + 1 < len; ++i)
    if (text[i] == '{' && (text[i + 1] == '{' || text[i + 1] == '%' || text[i + 1] == '#'))
      return i;
  return len;
}

/* The closing "}}" / "%}" / "#}" of a tag whose inside starts at `from`, skipping string
 * literals in expressions; len when there is none. */
static size_t find_tag_end(const char *text, size_t len, size_t from, char marker) {
  char quote = 0;
  for (size_t i = from; i + 1 < len; ++i) {
    char c = text[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if ((c == '\'' || c == '"') && marker != '#') quote = c;
    else if (c == (marker == '{' ? '}' : marker) && text[i + 1] == '}') return i;
  }
  return len;
}

static vlmc_status_t lex_tag(template_doc_t *doc, size_t start, size_t *out_next) {
  const char *text = doc->text;
  char marker = text[start + 1];
  raw_token_t token = {marker == '{' ? RAW_OUTPUT : marker == '%' ? RAW_STATEMENT : RAW_COMMENT,
                       start + 2, 0, start, 0, 0};
  if (token.begin < doc->len && (text[token.begin] == '-' || text[token.begin] == '+'))
    token.open_sign = text[token.begin++];
  size_t close = find_tag_end(text, doc->len, token.begin, marker);
  if (close == doc->len)
    return doc_error(doc, VLMC_PARSE_ERROR, start, "unterminated %c%c tag", '{', marker);
  token.end = close;
  if (token.end > token.begin && (text[token.end - 1] == '-' || text[token.end - 1] == '+'))
    token.close_sign = text[--token.end];
  *out_next = close + 2;
  return raw_push(doc, token);
}

static vlmc_status_t lex_raw(template_doc_t *doc) {
  size_t pos = 0;
  while (pos < doc->len) {
    size_t tag = find_tag_start(doc->text, doc->len, pos);
    if (tag > pos) {
      raw_token_t token = {RAW_TEXT, pos, tag, pos, 0, 0};
      VLMC_RETURN_IF_ERROR(raw_push(doc, token));
    }
    if (tag == doc->len) break;
    VLMC_RETURN_IF_ERROR(lex_tag(doc, tag, &pos));
  }
  return NULL;
}

/* ---- whitespace rules ---- */

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool is_block_like(const raw_token_t *token) {
  return token->kind == RAW_STATEMENT || token->kind == RAW_COMMENT;
}

/* Applies what the tag before a text consumes ("-" strips all whitespace, trim_blocks one
 * newline after a block) and reports whether that consumption ended a line, which is
 * Jinja's "line_starting" for lstrip_blocks. */
static size_t consume_after_tag(const template_doc_t *doc, const raw_token_t *prev, size_t begin,
                                size_t end, bool *io_line_starting) {
  if (!prev) return begin;
  size_t b = begin;
  if (prev->close_sign == '-') {
    while (b < end && is_space(doc->text[b])) ++b;
  } else if (prev->close_sign != '+' && is_block_like(prev) && b < end && doc->text[b] == '\n') {
    ++b;
  }
  *io_line_starting = b > begin && doc->text[b - 1] == '\n';
  return b;
}

/* Applies what the tag after a text strips from its end ("-", or lstrip_blocks for blocks
 * that start a line). */
static size_t strip_before_tag(const template_doc_t *doc, const raw_token_t *next, size_t begin,
                               size_t end, bool line_starting) {
  if (!next) return end;
  if (next->open_sign == '-') {
    while (end > begin && is_space(doc->text[end - 1])) --end;
    return end;
  }
  if (next->open_sign == '+' || !is_block_like(next)) return end;
  size_t line_start = end;
  while (line_start > begin && doc->text[line_start - 1] != '\n') --line_start;
  if (line_start == begin && !line_starting) return end;
  for (size_t i = line_start; i < end; ++i)
    if (!is_space(doc->text[i])) return end;
  return line_start;
}

/* ---- elements ---- */

static vlmc_status_t elem_push(template_doc_t *doc, elem_kind_t kind, const char *text,
                               size_t len, size_t offset) {
  if (kind == ELEM_TEXT && len == 0) return NULL;
  bool after_text = doc->elem_count > 0 && doc->elems[doc->elem_count - 1].kind == ELEM_TEXT;
  if (kind == ELEM_TEXT && after_text) {
    /* Adjacent literal text is one element whichever way it was written. */
    elem_t *last = &doc->elems[doc->elem_count - 1];
    char *joined = vlmc_arena_alloc(&doc->arena, last->len + len + 1, 1);
    if (!joined) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
    memcpy(joined, last->text, last->len);
    memcpy(joined + last->len, text, len);
    last->text = joined;
    last->len += len;
    return NULL;
  }
  if (!grow_array((void **)&doc->elems, &doc->elem_capacity, doc->elem_count + 1, sizeof(elem_t)))
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
  char *copy = vlmc_arena_strndup(&doc->arena, text, len);
  if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
  doc->elems[doc->elem_count++] = (elem_t){kind, copy, len, offset};
  return NULL;
}

/* ---- expressions ---- */

typedef enum { TOK_IDENT, TOK_STRING, TOK_NUMBER, TOK_OP } tok_kind_t;

typedef struct {
  tok_kind_t kind;
  const char *text; /* identifiers, numbers, operators: source; strings: the decoded value */
  size_t len;
  size_t offset;
} tok_t;

typedef struct {
  tok_t *items;
  size_t count, capacity;
} toks_t;

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static vlmc_status_t toks_push(toks_t *toks, tok_t tok) {
  if (!grow_array((void **)&toks->items, &toks->capacity, toks->count + 1, sizeof tok))
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
  toks->items[toks->count++] = tok;
  return NULL;
}

/* Decodes a Python-style string literal's common escapes; others keep their backslash, as
 * Python's unicode-escape leaves unknown escapes. */
static vlmc_status_t lex_string(template_doc_t *doc, size_t *io, size_t end, toks_t *toks) {
  const char *text = doc->text;
  size_t start = *io;
  char quote = text[start];
  vlmc_strbuf_t value;
  vlmc_strbuf_init(&value);
  size_t i = start + 1;
  while (i < end && text[i] != quote) {
    if (text[i] == '\\' && i + 1 < end) {
      char e = text[i + 1];
      const char *mapped = e == 'n' ? "\n" : e == 't' ? "\t" : e == 'r' ? "\r" : NULL;
      if (mapped) vlmc_strbuf_puts(&value, mapped);
      else if (e == '\\' || e == '\'' || e == '"') vlmc_strbuf_putc(&value, e);
      else vlmc_strbuf_append(&value, text + i, 2);
      i += 2;
    } else {
      vlmc_strbuf_putc(&value, text[i++]);
    }
  }
  if (i >= end) {
    vlmc_strbuf_deinit(&value);
    return doc_error(doc, VLMC_PARSE_ERROR, start, "unterminated string literal");
  }
  char *copy = vlmc_arena_strndup(&doc->arena, vlmc_strbuf_cstr(&value), value.len);
  size_t copy_len = value.len;
  vlmc_strbuf_deinit(&value);
  if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
  *io = i + 1;
  return toks_push(toks, (tok_t){TOK_STRING, copy, copy_len, start});
}

static size_t operator_length(const char *text, size_t i, size_t end) {
  static const char *const two[] = {"==", "!=", "<=", ">=", "//", "**"};
  for (size_t k = 0; k < sizeof two / sizeof two[0]; ++k)
    if (i + 1 < end && text[i] == two[k][0] && text[i + 1] == two[k][1]) return 2;
  return 1;
}

static vlmc_status_t lex_expression(template_doc_t *doc, size_t begin, size_t end, toks_t *toks) {
  const char *text = doc->text;
  size_t i = begin;
  while (i < end) {
    char c = text[i];
    size_t start = i;
    if (is_space(c)) {
      ++i;
    } else if (c == '\'' || c == '"') {
      VLMC_RETURN_IF_ERROR(lex_string(doc, &i, end, toks));
    } else if (is_ident_start(c) || is_digit(c)) {
      bool ident = is_ident_start(c);
      while (i < end && (is_ident_char(text[i]) || (!ident && text[i] == '.' && i + 1 < end &&
                                                    is_digit(text[i + 1]))))
        ++i;
      VLMC_RETURN_IF_ERROR(
          toks_push(toks, (tok_t){ident ? TOK_IDENT : TOK_NUMBER, text + start, i - start, start}));
    } else {
      i += operator_length(text, i, end);
      VLMC_RETURN_IF_ERROR(toks_push(toks, (tok_t){TOK_OP, text + start, i - start, start}));
    }
  }
  return NULL;
}

static bool tok_is_op(const tok_t *tok, const char *op) {
  return tok->kind == TOK_OP && tok->len == strlen(op) && memcmp(tok->text, op, tok->len) == 0;
}

static bool string_is_identifier(const tok_t *tok) {
  if (tok->kind != TOK_STRING || tok->len == 0 || !is_ident_start(tok->text[0])) return false;
  for (size_t i = 1; i < tok->len; ++i)
    if (!is_ident_char(tok->text[i])) return false;
  return true;
}

/* x['name'] is x.name for the dicts a chat template sees: rewrite the first into the second. */
static void normalize_subscripts(toks_t *toks) {
  size_t out = 0;
  for (size_t i = 0; i < toks->count; ++i) {
    tok_t *t = toks->items;
    bool after_value = out > 0 && (t[out - 1].kind == TOK_IDENT || tok_is_op(&t[out - 1], "]") ||
                                   tok_is_op(&t[out - 1], ")"));
    if (after_value && tok_is_op(&t[i], "[") && i + 2 < toks->count &&
        string_is_identifier(&t[i + 1]) && tok_is_op(&t[i + 2], "]")) {
      t[out++] = (tok_t){TOK_OP, ".", 1, t[i].offset};
      t[out++] = (tok_t){TOK_IDENT, t[i + 1].text, t[i + 1].len, t[i + 1].offset};
      i += 2;
      continue;
    }
    t[out++] = t[i];
  }
  toks->count = out;
}

static void append_quoted_string(const tok_t *tok, vlmc_strbuf_t *out) {
  vlmc_strbuf_putc(out, '\'');
  for (size_t i = 0; i < tok->len; ++i) {
    char c = tok->text[i];
    if (c == '\'' || c == '\\') vlmc_strbuf_printf(out, "\\%c", c);
    else if (c == '\n') vlmc_strbuf_puts(out, "\\n");
    else if ((unsigned char)c < 0x20) vlmc_strbuf_printf(out, "\\x%02x", (unsigned char)c);
    else vlmc_strbuf_putc(out, c);
  }
  vlmc_strbuf_putc(out, '\'');
}

/* One canonical spelling: tokens separated by one space, none around '.' or inside brackets. */
static void spell_tokens(const tok_t *toks, size_t count, vlmc_strbuf_t *out) {
  for (size_t i = 0; i < count; ++i) {
    const tok_t *t = &toks[i];
    bool tight = i == 0 || tok_is_op(t, ".") || tok_is_op(&toks[i - 1], ".") ||
                 tok_is_op(t, ")") || tok_is_op(t, "]") || tok_is_op(t, ",") ||
                 tok_is_op(&toks[i - 1], "(") || tok_is_op(&toks[i - 1], "[") ||
                 ((tok_is_op(t, "(") || tok_is_op(t, "[")) && toks[i - 1].kind == TOK_IDENT);
    if (!tight) vlmc_strbuf_putc(out, ' ');
    if (t->kind == TOK_STRING) append_quoted_string(t, out);
    else vlmc_strbuf_append(out, t->text, t->len);
  }
}

static vlmc_status_t record_identifiers(template_doc_t *doc, const toks_t *toks) {
  for (size_t i = 0; i < toks->count; ++i) {
    const tok_t *t = &toks->items[i];
    if (t->kind != TOK_IDENT) continue;
    size_t need = doc->ident_count + 1, capacity = doc->ident_capacity;
    if (!grow_array((void **)&doc->idents, &capacity, need, sizeof(char *)) ||
        !grow_array((void **)&doc->ident_offsets, &doc->ident_capacity, need, sizeof(size_t)))
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
    char *name = vlmc_arena_strndup(&doc->arena, t->text, t->len);
    if (!name) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template");
    doc->idents[doc->ident_count] = name;
    doc->ident_offsets[doc->ident_count++] = t->offset;
  }
  return NULL;
}

static vlmc_status_t push_spelled(template_doc_t *doc, elem_kind_t kind, const tok_t *toks,
                                  size_t count, size_t offset) {
  vlmc_strbuf_t spelled;
  vlmc_strbuf_init(&spelled);
  spell_tokens(toks, count, &spelled);
  vlmc_status_t status =
      spelled.failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "chat template")
                     : elem_push(doc, kind, vlmc_strbuf_cstr(&spelled), spelled.len, offset);
  vlmc_strbuf_deinit(&spelled);
  return status;
}

/* {{ 'a' + x ~ 'b' }} outputs the same as the text a, {{ x }}, the text b: split it so. */
static vlmc_status_t push_output(template_doc_t *doc, const toks_t *toks, size_t offset) {
  size_t part_start = 0;
  int depth = 0;
  for (size_t i = 0; i <= toks->count; ++i) {
    const tok_t *t = i < toks->count ? &toks->items[i] : NULL;
    if (t && (tok_is_op(t, "(") || tok_is_op(t, "["))) ++depth;
    if (t && (tok_is_op(t, ")") || tok_is_op(t, "]"))) --depth;
    bool split = !t || (depth == 0 && (tok_is_op(t, "+") || tok_is_op(t, "~")));
    if (!split) continue;
    size_t part_len = i - part_start;
    const tok_t *part = part_len ? &toks->items[part_start] : NULL; /* "{{ }}" has no tokens */
    if (part_len == 1 && part->kind == TOK_STRING)
      VLMC_RETURN_IF_ERROR(elem_push(doc, ELEM_TEXT, part->text, part->len, part->offset));
    else
      VLMC_RETURN_IF_ERROR(push_spelled(doc, ELEM_OUTPUT, part, part_len, offset));
    part_start = i + 1;
  }
  return NULL;
}

static vlmc_status_t push_tag(template_doc_t *doc, const raw_token_t *token) {
  toks_t toks = {NULL, 0, 0};
  vlmc_status_t status = lex_expression(doc, token->begin, token->end, &toks);
  if (!status) normalize_subscripts(&toks);
  if (!status) status = record_identifiers(doc, &toks);
  if (!status && token->kind == RAW_STATEMENT && toks.count > 0 &&
      toks.items[0].kind == TOK_IDENT && toks.items[0].len == 3 &&
      memcmp(toks.items[0].text, "raw", 3) == 0)
    status = doc_error(doc, VLMC_UNSUPPORTED, token->offset,
                       "{%% raw %%} blocks are not supported in chat templates");
  if (!status && token->kind == RAW_OUTPUT) status = push_output(doc, &toks, token->offset);
  if (!status && token->kind == RAW_STATEMENT)
    status = push_spelled(doc, ELEM_STATEMENT, toks.items, toks.count, token->offset);
  free(toks.items);
  return status;
}

static vlmc_status_t build_elements(template_doc_t *doc) {
  VLMC_RETURN_IF_ERROR(lex_raw(doc));
  bool line_starting = true;
  const raw_token_t *items = doc->raw.items;
  for (size_t i = 0; i < doc->raw.count; ++i) {
    const raw_token_t *token = &items[i];
    const raw_token_t *prev = i > 0 ? &items[i - 1] : NULL;
    const raw_token_t *next = i + 1 < doc->raw.count ? &items[i + 1] : NULL;
    if (token->kind == RAW_TEXT) {
      size_t begin = consume_after_tag(doc, prev, token->begin, token->end, &line_starting);
      if (!prev) line_starting = true;
      size_t end = strip_before_tag(doc, next, begin, token->end, line_starting);
      VLMC_RETURN_IF_ERROR(elem_push(doc, ELEM_TEXT, doc->text + begin, end - begin, begin));
      continue;
    }
    if (token->kind != RAW_COMMENT) VLMC_RETURN_IF_ERROR(push_tag(doc, token));
  }
  return NULL;
}

static void doc_init(template_doc_t *doc, const char *source, const char *text, size_t len) {
  memset(doc, 0, sizeof *doc);
  doc->source = source;
  doc->text = text;
  doc->len = len;
  vlmc_arena_init(&doc->arena);
}

static void doc_deinit(template_doc_t *doc) {
  free(doc->raw.items);
  free(doc->elems);
  free(doc->idents);
  free(doc->ident_offsets);
  vlmc_arena_deinit(&doc->arena);
}

/* ---- comparison and diagnosis ---- */

static void describe_elem(const elem_t *elem, vlmc_strbuf_t *out) {
  if (!elem) {
    vlmc_strbuf_puts(out, "the end of the template");
  } else if (elem->kind == ELEM_TEXT) {
    vlmc_strbuf_puts(out, "the text ");
    bool cut = elem->len > 72;
    vlmc_tokenizer_json_string_encode(elem->text, cut ? 72 : elem->len, out);
    if (cut) vlmc_strbuf_puts(out, "...");
  } else {
    vlmc_strbuf_printf(out, elem->kind == ELEM_OUTPUT ? "{{ %s }}" : "{%% %s %%}", elem->text);
  }
}

static bool elems_equal(const elem_t *a, const elem_t *b) {
  return a->kind == b->kind && a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

static bool doc_has_ident(const template_doc_t *doc, const char *name) {
  for (size_t i = 0; i < doc->ident_count; ++i)
    if (strcmp(doc->idents[i], name) == 0) return true;
  return false;
}

/* The known templates, in the order a tie in likeness goes. */
static const struct {
  vlmc_chat_template_kind_t kind;
  const char *name, *text;
} kKnown[] = {
    {VLMC_CHAT_TEMPLATE_QWEN2_VL, "the Qwen2-VL template", kQwen2VlTemplate},
    {VLMC_CHAT_TEMPLATE_QWEN2_TEXT, "the Qwen2 text template", kQwen2TextTemplate},
    {VLMC_CHAT_TEMPLATE_QWEN2_5_TEXT, "the Qwen2.5 text template", kQwen2_5TextTemplate},
    {VLMC_CHAT_TEMPLATE_QWEN3_TEXT, "the Qwen3 text template", kQwen3TextTemplate},
    {VLMC_CHAT_TEMPLATE_QWEN3_VL, "the Qwen3-VL template", kQwen3VlTemplate},
};
enum { KNOWN_COUNT = sizeof kKnown / sizeof kKnown[0] };

static vlmc_status_t explain_mismatch(const template_doc_t *doc, const template_doc_t *official,
                                      const char *name, size_t at) {
  for (size_t i = 0; i < doc->ident_count; ++i)
    if (!doc_has_ident(official, doc->idents[i]))
      return doc_error(doc, VLMC_UNSUPPORTED, doc->ident_offsets[i],
                       "template not recognised as %s, the closest known one (uses '%s', which "
                       "it does not)",
                       name, doc->idents[i]);
  const elem_t *found = at < doc->elem_count ? &doc->elems[at] : NULL;
  const elem_t *expected = at < official->elem_count ? &official->elems[at] : NULL;
  vlmc_strbuf_t found_text, expected_text;
  vlmc_strbuf_init(&found_text);
  vlmc_strbuf_init(&expected_text);
  describe_elem(found, &found_text);
  describe_elem(expected, &expected_text);
  vlmc_status_t status = doc_error(
      doc, VLMC_UNSUPPORTED, found ? found->offset : doc->len,
      "template not recognised as %s, the closest known one (it has %s where the official "
      "template has %s)",
      name, vlmc_strbuf_cstr(&found_text), vlmc_strbuf_cstr(&expected_text));
  vlmc_strbuf_deinit(&found_text);
  vlmc_strbuf_deinit(&expected_text);
  return status;
}

/* How many leading elements doc shares with a known template (*out_equal: all of them, and
 * no more); with `explain` and a difference, the difference by name. */
static vlmc_status_t compare_with(const template_doc_t *doc, size_t known, bool explain,
                                  size_t *out_shared, bool *out_equal) {
  template_doc_t official;
  doc_init(&official, kKnown[known].name, kKnown[known].text, strlen(kKnown[known].text));
  vlmc_status_t status = build_elements(&official);
  *out_equal = false;
  *out_shared = 0;
  if (!status) {
    size_t n = doc->elem_count < official.elem_count ? doc->elem_count : official.elem_count;
    size_t at = 0;
    while (at < n && elems_equal(&doc->elems[at], &official.elems[at])) ++at;
    *out_shared = at;
    *out_equal = at == n && doc->elem_count == official.elem_count;
    if (!*out_equal && explain) status = explain_mismatch(doc, &official, kKnown[known].name, at);
  }
  doc_deinit(&official);
  return status;
}

/* Recognised when equal to a known template; otherwise refused by its difference from the
 * known template it shares the longest start with. */
vlmc_status_t vlmc_chat_template_recognize(const char *source_name, const char *text, size_t len,
                                           vlmc_chat_template_t *out_template) {
  template_doc_t doc;
  doc_init(&doc, source_name, text, len);
  vlmc_status_t status = build_elements(&doc);
  size_t closest = 0, best = 0;
  bool equal = false;
  for (size_t k = 0; !status && !equal && k < KNOWN_COUNT; ++k) {
    size_t shared;
    status = compare_with(&doc, k, false, &shared, &equal);
    if (equal) out_template->kind = kKnown[k].kind;
    if (shared > best) {
      best = shared;
      closest = k;
    }
  }
  if (!status && !equal) {
    size_t shared;
    status = compare_with(&doc, closest, true, &shared, &equal);
  }
  doc_deinit(&doc);
  return status;
}
