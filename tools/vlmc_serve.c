/* vlmc-serve: an OpenAI-compatible HTTP server over one loaded artifact (issue 20).
 *   GET  /health               {"status":"ok"} (no API key needed)
 *   GET  /v1/models            the one model, named after the artifact's file
 *   POST /v1/chat/completions  a conversation (system, user and assistant messages, images
 *                              as data URIs in user messages) rendered by the chat template
 *                              and answered whole or streamed as server-sent events (every
 *                              request a fresh prefill of its whole conversation)
 * HTTP is libmicrohttpd's (a thread per connection, so a handler may block on the model);
 * what a request body means is tools/serve_json.c's. The session runs one generation at a
 * time: requests wait in line, first come first served (a ticket lock). SIGTERM/SIGINT stop
 * accepting, let the requests already in flight finish, and exit 0. Links the runtime only
 * (tests/runtime_deps.cmake checks that no LLVM or MLIR library is linked). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "runtime/session.h"
#include "support/strbuf.h"
#include "tools/cli.h"
#include "tools/serve_json.h"

typedef struct {
  vlmc_session_options_t session_options;
  const char *host;
  int port;
  const char *api_key;
  size_t max_body;
  unsigned timeout_s;
  bool allow_file_images;
} serve_options_t;

/* First come, first served: a mutex alone lets a late request overtake the ones waiting. */
typedef struct {
  pthread_mutex_t mutex;
  pthread_cond_t turn;
  unsigned long next_ticket, serving;
} ticket_lock_t;

typedef struct {
  const serve_options_t *o;
  vlmc_session_t *session;
  char model_id[256];
  vlmc_sampler_options_t sampling; /* the artifact's defaults */
  char temp_dir[PATH_MAX];         /* private (0700): the requests' images */
  ticket_lock_t generate_lock;
  /* requests and stream producers in flight; shutdown waits for none */
  pthread_mutex_t busy_mutex;
  pthread_cond_t idle;
  int busy;
  atomic_ulong next_id;
} server_t;

static void ticket_lock(ticket_lock_t *t) {
  pthread_mutex_lock(&t->mutex);
  unsigned long mine = t->next_ticket++;
  while (t->serving != mine) pthread_cond_wait(&t->turn, &t->mutex);
  pthread_mutex_unlock(&t->mutex);
}

static void ticket_unlock(ticket_lock_t *t) {
  pthread_mutex_lock(&t->mutex);
  t->serving++;
  pthread_cond_broadcast(&t->turn);
  pthread_mutex_unlock(&t->mutex);
}

static void busy_add(server_t *s, int delta) {
  pthread_mutex_lock(&s->busy_mutex);
  s->busy += delta;
  if (s->busy == 0) pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->busy_mutex);
}

/* ---- responses ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *text, size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)text,
                                                           MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, vlmc_strbuf_t *b) {
  if (b->failed) return MHD_NO;
  return send_text(c, status, "application/json", vlmc_strbuf_cstr(b), b->len);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg) {
  vlmc_strbuf_t b;
  vlmc_strbuf_init(&b);
  serve_put_error(&b, (int)status, msg);
  enum MHD_Result ret = send_json(c, status, &b);
  vlmc_strbuf_deinit(&b);
  return ret;
}

/* The HTTP status of a refused request or a failed generation: the client's input (a prompt
 * that does not fit, a missing file image) is a 400, the rest is the server's. */
static unsigned status_http(vlmc_status_t st) {
  switch (vlmc_status_code(st)) {
  case VLMC_INVALID_ARGUMENT:
  case VLMC_PARSE_ERROR:
  case VLMC_NOT_FOUND:
  case VLMC_OUT_OF_RANGE:
  case VLMC_UNSUPPORTED:
    return MHD_HTTP_BAD_REQUEST;
  default:
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
  }
}

/* ---- generation ---- */

static vlmc_generate_options_t generate_options(const server_t *s, const serve_request_t *q,
                                                const char **paths) {
  vlmc_sampler_options_t sampling = s->sampling;
  if (q->has_temperature) sampling.temperature = (float)q->temperature;
  if (q->has_top_p) sampling.top_p = (float)q->top_p;
  if (q->has_seed) sampling.seed = q->seed;
  for (size_t i = 0; i < q->num_images; ++i) paths[i] = q->images[i].path;
  return (vlmc_generate_options_t){
      .messages = q->messages, .num_messages = q->num_messages, .image_paths = paths,
      .num_images = q->num_images, .max_new_tokens = q->max_tokens, .sampling = sampling,
      /* the runtime's stop strings (runtime/stop_text.h): no part of one is ever streamed */
      .stop_strings = (const char *const *)q->stop, .num_stop_strings = q->num_stop};
}

static bool collect_text(void *ctx, const char *text, size_t len) {
  vlmc_strbuf_append(ctx, text, len);
  return true;
}

/* "stop" when the answer ended on end-of-sequence or a stop string, "length" otherwise. */
static const char *finish_reason(const vlmc_generate_result_t *r) {
  return r->stopped_on_string || r->stopped_on_eos ? "stop" : "length";
}

static void answer_meta(server_t *s, char *id, size_t cap, serve_answer_meta_t *meta) {
  snprintf(id, cap, "chatcmpl-%lu", atomic_fetch_add(&s->next_id, 1) + 1);
  *meta = (serve_answer_meta_t){.id = id, .model = s->model_id, .created = (long long)time(NULL)};
}

static enum MHD_Result answer_whole(server_t *s, struct MHD_Connection *c, serve_request_t *q) {
  const char *paths[SERVE_MAX_IMAGES];
  vlmc_generate_options_t g = generate_options(s, q, paths);
  vlmc_strbuf_t text, out;
  vlmc_strbuf_init(&text);
  vlmc_strbuf_init(&out);
  g.on_text = collect_text;
  g.text_ctx = &text;
  vlmc_generate_result_t res = {0};
  ticket_lock(&s->generate_lock);
  vlmc_status_t st = vlmc_session_generate(s->session, &g, &res);
  ticket_unlock(&s->generate_lock);
  enum MHD_Result ret;
  if (st) {
    ret = send_error(c, status_http(st), vlmc_status_message(st));
  } else {
    char id[64];
    serve_answer_meta_t meta;
    answer_meta(s, id, sizeof id, &meta);
    serve_put_completion(&out, &meta, vlmc_strbuf_cstr(&text), finish_reason(&res),
                         res.prompt_tokens, res.generated_tokens);
    ret = send_json(c, MHD_HTTP_OK, &out);
  }
  vlmc_status_free(st);
  vlmc_generate_result_deinit(&res);
  vlmc_strbuf_deinit(&text);
  vlmc_strbuf_deinit(&out);
  return ret;
}

/* A streamed answer: a producer thread generates and appends server-sent events to `pending`;
 * libmicrohttpd's content reader (this connection's thread) waits for them and sends them. Two
 * owners, the producer and the response; the last to let go frees it. */
typedef struct {
  server_t *server;
  serve_request_t request;
  char id[64];
  serve_answer_meta_t meta;
  pthread_mutex_t mutex;
  pthread_cond_t more;
  vlmc_strbuf_t pending;
  size_t sent; /* bytes of pending already handed to libmicrohttpd */
  bool done;   /* the producer appended its last event */
  bool gone;   /* the response is finished (or the client went away): stop generating */
  int refs;
} stream_t;

static void stream_release(stream_t *st) {
  pthread_mutex_lock(&st->mutex);
  bool last = --st->refs == 0;
  pthread_mutex_unlock(&st->mutex);
  if (!last) return;
  serve_request_deinit(&st->request);
  vlmc_strbuf_deinit(&st->pending);
  pthread_mutex_destroy(&st->mutex);
  pthread_cond_destroy(&st->more);
  free(st);
}

/* Appends an event; false once nobody listens (which stops the generation). */
static bool stream_push_event(stream_t *st, const vlmc_strbuf_t *event, bool last) {
  pthread_mutex_lock(&st->mutex);
  vlmc_strbuf_append(&st->pending, event->data ? event->data : "", event->len);
  if (last) st->done = true;
  bool listening = !st->gone;
  pthread_cond_broadcast(&st->more);
  pthread_mutex_unlock(&st->mutex);
  return listening;
}

/* One piece of the answer as an event; false (stop generating) once nobody listens. */
static bool stream_text(void *ctx, const char *text, size_t len) {
  stream_t *st = ctx;
  vlmc_strbuf_t event;
  vlmc_strbuf_init(&event);
  serve_put_chunk(&event, &st->meta, text, len, NULL);
  bool listening = stream_push_event(st, &event, false);
  vlmc_strbuf_deinit(&event);
  return listening;
}

static void *stream_produce(void *arg) {
  stream_t *st = arg;
  server_t *s = st->server;
  const char *paths[SERVE_MAX_IMAGES];
  vlmc_generate_options_t g = generate_options(s, &st->request, paths);
  g.on_text = stream_text;
  g.text_ctx = st;
  vlmc_generate_result_t res = {0};
  ticket_lock(&s->generate_lock);
  vlmc_status_t status = vlmc_session_generate(s->session, &g, &res);
  ticket_unlock(&s->generate_lock);
  vlmc_strbuf_t event;
  vlmc_strbuf_init(&event);
  if (status) { /* the headers are sent: the error is an event of its own */
    vlmc_strbuf_puts(&event, "data: ");
    serve_put_error(&event, (int)status_http(status), vlmc_status_message(status));
    vlmc_strbuf_puts(&event, "\n\n");
  } else {
    serve_put_chunk(&event, &st->meta, NULL, 0, finish_reason(&res));
  }
  vlmc_strbuf_puts(&event, "data: [DONE]\n\n");
  stream_push_event(st, &event, true);
  vlmc_strbuf_deinit(&event);
  vlmc_status_free(status);
  vlmc_generate_result_deinit(&res);
  stream_release(st);
  busy_add(s, -1);
  return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream_t *st = cls;
  pthread_mutex_lock(&st->mutex);
  while (st->sent == st->pending.len && !st->done) pthread_cond_wait(&st->more, &st->mutex);
  size_t n = st->pending.len - st->sent;
  if (n > max) n = max;
  if (n) memcpy(buf, st->pending.data + st->sent, n);
  st->sent += n;
  if (st->sent == st->pending.len) { /* everything handed over: start the buffer again */
    vlmc_strbuf_clear(&st->pending);
    st->sent = 0;
  }
  bool end = n == 0 && st->done;
  pthread_mutex_unlock(&st->mutex);
  return end ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void stream_free(void *cls) {
  stream_t *st = cls;
  pthread_mutex_lock(&st->mutex);
  st->gone = true;
  pthread_mutex_unlock(&st->mutex);
  stream_release(st);
}

/* Takes the request over (*q is cleared). */
static enum MHD_Result answer_stream(server_t *s, struct MHD_Connection *c, serve_request_t *q) {
  stream_t *st = calloc(1, sizeof *st);
  if (!st) return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
  st->server = s;
  st->request = *q;
  memset(q, 0, sizeof *q);
  answer_meta(s, st->id, sizeof st->id, &st->meta);
  pthread_mutex_init(&st->mutex, NULL);
  pthread_cond_init(&st->more, NULL);
  vlmc_strbuf_init(&st->pending);
  st->refs = 2;
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                             stream_read, st, stream_free);
  if (!r) {
    st->refs = 1;
    stream_release(st);
    return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot create a response");
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  busy_add(s, 1);
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&thread, &attr, stream_produce, st) != 0) {
    busy_add(s, -1);
    pthread_attr_destroy(&attr);
    stream_release(st); /* the producer's share; the response's goes with it */
    MHD_destroy_response(r);
    return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot start a thread");
  }
  pthread_attr_destroy(&attr);
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

/* ---- routing ---- */

typedef struct {
  vlmc_strbuf_t body;
  bool too_large; /* the body passed --max-body: the rest is read and dropped */
  bool counted;   /* in server_t.busy until the request completes */
} connection_t;

static enum MHD_Result chat_completions(server_t *s, struct MHD_Connection *c, connection_t *k) {
  serve_request_t q;
  vlmc_status_t st = serve_request_parse(k->body.data ? k->body.data : "", k->body.len,
                                         s->o->allow_file_images, &q);
  if (!st) st = serve_request_write_images(&q, s->temp_dir);
  if (st) {
    enum MHD_Result ret = send_error(c, status_http(st), vlmc_status_message(st));
    vlmc_status_free(st);
    serve_request_deinit(&q);
    return ret;
  }
  enum MHD_Result ret = q.stream ? answer_stream(s, c, &q) : answer_whole(s, c, &q);
  serve_request_deinit(&q);
  return ret;
}

static bool authorized(const server_t *s, struct MHD_Connection *c) {
  if (!s->o->api_key) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->o->api_key);
}

static enum MHD_Result route(server_t *s, struct MHD_Connection *c, const char *url,
                             const char *method, connection_t *k) {
  bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (!strcmp(url, "/health")) {
    if (!get) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "/health takes GET");
    static const char ok[] = "{\"status\":\"ok\"}";
    return send_text(c, MHD_HTTP_OK, "application/json", ok, sizeof ok - 1);
  }
  bool models = !strcmp(url, "/v1/models"), chat = !strcmp(url, "/v1/chat/completions");
  if (!models && !chat) {
    char message[300];
    snprintf(message, sizeof message, "no such path: %.200s (vlmc-serve answers /health, "
             "/v1/models and /v1/chat/completions)", url);
    return send_error(c, MHD_HTTP_NOT_FOUND, message);
  }
  if (!authorized(s, c))
    return send_error(c, MHD_HTTP_UNAUTHORIZED, "a missing or wrong API key: send "
                      "\"Authorization: Bearer KEY\" with vlmc-serve's --api-key");
  if (models) {
    if (!get) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "/v1/models takes GET");
    vlmc_strbuf_t b;
    vlmc_strbuf_init(&b);
    vlmc_strbuf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    serve_put_json_string(&b, s->model_id);
    vlmc_strbuf_puts(&b, ",\"object\":\"model\",\"owned_by\":\"vlmc\"}]}");
    enum MHD_Result ret = send_json(c, MHD_HTTP_OK, &b);
    vlmc_strbuf_deinit(&b);
    return ret;
  }
  if (!post) return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "/v1/chat/completions takes POST");
  if (k->too_large) {
    char message[128];
    snprintf(message, sizeof message, "the request body is larger than vlmc-serve's --max-body "
             "(%zu bytes)", s->o->max_body);
    return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, message);
  }
  busy_add(s, 1);
  k->counted = true;
  return chat_completions(s, c, k);
}

/* libmicrohttpd calls this once with the headers, then with each piece of the body, then
 * once more with none: the request is answered then. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls) {
  (void)version;
  server_t *s = cls;
  connection_t *k = *con_cls;
  if (!k) {
    if (!(k = calloc(1, sizeof *k))) return MHD_NO;
    vlmc_strbuf_init(&k->body);
    *con_cls = k;
    const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length && strtoull(length, NULL, 10) > s->o->max_body) k->too_large = true;
    return MHD_YES;
  }
  if (*upload_data_size) {
    if (!k->too_large && k->body.len + *upload_data_size > s->o->max_body) {
      k->too_large = true;
      vlmc_strbuf_deinit(&k->body);
      vlmc_strbuf_init(&k->body);
    }
    if (!k->too_large) vlmc_strbuf_append(&k->body, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (k->body.failed) return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
  return route(s, c, url, method, k);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode why) {
  (void)c;
  (void)why;
  server_t *s = cls;
  connection_t *k = *con_cls;
  if (!k) return;
  if (k->counted) busy_add(s, -1);
  vlmc_strbuf_deinit(&k->body);
  free(k);
  *con_cls = NULL;
}

/* ---- command line ---- */

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: vlmc-serve MODEL.vlmc [options]\n"
          "An OpenAI-compatible HTTP server over one loaded artifact:\n"
          "  GET /health, GET /v1/models, POST /v1/chat/completions (\"messages\": system,\n"
          "  user and assistant turns ending with the user's, each request's conversation\n"
          "  run afresh; images in user messages as data:image/png;base64,... or JPEG URIs;\n"
          "  \"max_tokens\", \"temperature\", \"top_p\", \"seed\", \"stream\": true for\n"
          "  server-sent events; \"stop\": up to 4 strings).\n"
          "The model answers one request at a time: the others wait in line, in order.\n"
          "  --host ADDR            the address to listen on (default 127.0.0.1)\n"
          "  --port N               the port (default 8080; 0 picks a free one, and the\n"
          "                         \"listening on\" line on stderr names it)\n"
          "  --api-key KEY          requests need \"Authorization: Bearer KEY\" (/health does\n"
          "                         not)\n"
          "  --max-body BYTES       refuse request bodies larger than this with 413 (default\n"
          "                         33554432, 32 MiB)\n"
          "  --timeout SECONDS      close a connection idle this long (default 600)\n"
          "  --allow-file-images    image_url may be a local path or file:// URL (off: only\n"
          "                         data URIs; http(s) URLs are never fetched)\n"
          "  --backend NAME, --threads N, --device N, --weights MODE, --params DIR\n"
          "                         as vlmc-run's\n"
          "  --version              the version, git revision and backends built in\n"
          "  -h, --help             this text\n"
          "Sampling defaults to the checkpoint's generation_config.json (as vlmc-run);\n"
          "max_tokens defaults to 128. SIGTERM or SIGINT: stop accepting, finish the requests\n"
          "in flight, exit 0.\n"
          "Exit status: 0 stopped by a signal, 1 a failure (named on stderr), 2 a usage error.\n");
}

static const vlmc_cli_option_t kOptions[] = {
    {"--help", "-h", false},      {"--version", NULL, false},
    {"--host", NULL, true},       {"--port", NULL, true},
    {"--api-key", NULL, true},    {"--max-body", NULL, true},
    {"--timeout", NULL, true},    {"--allow-file-images", NULL, false},
    {"--backend", NULL, true},    {"--threads", NULL, true},
    {"--device", NULL, true},     {"--params", NULL, true},
    {"--weights", NULL, true},
};

static int parse_valued(const char *a, const char *v, serve_options_t *o) {
  long long n;
  if (!strcmp(a, "--host")) o->host = v;
  else if (!strcmp(a, "--port")) {
    if (!vlmc_cli_parse_int(v, 0, 65535, &n))
      return vlmc_cli_bad_value(a, v, "a port, 0 to 65535");
    o->port = (int)n;
  } else if (!strcmp(a, "--api-key")) {
    if (!*v) return vlmc_cli_bad_value(a, v, "a non-empty key");
    o->api_key = v;
  } else if (!strcmp(a, "--max-body")) {
    if (!vlmc_cli_parse_int(v, 1, (long long)1 << 40, &n))
      return vlmc_cli_bad_value(a, v, "a positive size");
    o->max_body = (size_t)n;
  } else if (!strcmp(a, "--timeout")) {
    if (!vlmc_cli_parse_int(v, 1, 1 << 24, &n))
      return vlmc_cli_bad_value(a, v, "a positive number of seconds");
    o->timeout_s = (unsigned)n;
  } else {
    return vlmc_cli_session_option(a, v, &o->session_options) > 0 ? 2 : 0;
  }
  return 0;
}

static void print_version(void) {
  char names[256];
  vlmc_backend_names(names, sizeof names);
  char line[300];
  snprintf(line, sizeof line, "backends: %s; libmicrohttpd %s", names, MHD_get_version());
  vlmc_cli_print_version(stdout, "vlmc-serve", line);
}

/* Returns 0 to continue, 1 after --help or --version, 2 on a usage error. */
static int parse_args(int argc, char **argv, serve_options_t *o) {
  vlmc_cli_t cli = {.tool = "vlmc-serve", .options = kOptions,
                    .num_options = sizeof kOptions / sizeof kOptions[0], .index = 1};
  const char *a, *v;
  for (vlmc_cli_kind_t kind; (kind = vlmc_cli_next(&cli, argc, argv, &a, &v)) != VLMC_CLI_END;) {
    if (kind == VLMC_CLI_USAGE) return 2;
    if (kind == VLMC_CLI_POSITIONAL) {
      if (o->session_options.artifact_path) return vlmc_cli_bad_value("MODEL", v, "one artifact");
      o->session_options.artifact_path = v;
      continue;
    }
    if (!strcmp(a, "--help")) {
      print_usage(stdout);
      return 1;
    }
    if (!strcmp(a, "--version")) {
      print_version();
      return 1;
    }
    if (!strcmp(a, "--allow-file-images")) {
      o->allow_file_images = true;
      continue;
    }
    int rc = parse_valued(a, v, o);
    if (rc) return rc;
  }
  if (!o->session_options.artifact_path) {
    print_usage(stderr);
    return 2;
  }
  return 0;
}

/* ---- the server ---- */

/* The artifact file's base name without ".vlmc": the model's id in the API. */
static void model_id_of(const char *path, char *out, size_t cap) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n > 5 && !strcmp(base + n - 5, ".vlmc")) n -= 5;
  snprintf(out, cap, "%.*s", (int)n, base);
}

/* A private directory for the requests' images (removed at exit). */
static vlmc_status_t make_temp_dir(server_t *s) {
  const char *tmp = getenv("TMPDIR");
  snprintf(s->temp_dir, sizeof s->temp_dir, "%s/vlmc-serve-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(s->temp_dir))
    return vlmc_status_make(VLMC_IO_ERROR, "%s: mkdtemp: %s", s->temp_dir, strerror(errno));
  return NULL;
}

static vlmc_status_t listen_address(const char *host, int port, struct sockaddr_storage *addr,
                                    bool *ipv6) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE}, *res = NULL;
  char port_text[16];
  snprintf(port_text, sizeof port_text, "%d", port);
  int rc = getaddrinfo(host, port_text, &hints, &res);
  if (rc) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "--host %s: %s", host, gai_strerror(rc));
  memcpy(addr, res->ai_addr, res->ai_addrlen);
  *ipv6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  return NULL;
}

static vlmc_status_t start_daemon(server_t *s, struct MHD_Daemon **out) {
  struct sockaddr_storage addr;
  bool ipv6 = false;
  VLMC_RETURN_IF_ERROR(listen_address(s->o->host, s->o->port, &addr, &ipv6));
  /* AUTO: poll rather than select, so a descriptor past FD_SETSIZE is no failure */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_ITC | MHD_USE_AUTO | MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
  *out = MHD_start_daemon(flags, (uint16_t)s->o->port, NULL, NULL, handle, s,
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->o->timeout_s,
                          MHD_OPTION_NOTIFY_COMPLETED, request_completed, s, MHD_OPTION_END);
  if (!*out)
    return vlmc_status_make(VLMC_IO_ERROR, "cannot listen on %s:%d (in use, or not an address "
                            "of this machine?)", s->o->host, s->o->port);
  return NULL;
}

static vlmc_status_t serve(server_t *s, const sigset_t *stop_signals) {
  struct MHD_Daemon *d = NULL;
  VLMC_RETURN_IF_ERROR(start_daemon(s, &d));
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  int port = info ? info->port : s->o->port;
  bool ipv6 = strchr(s->o->host, ':') != NULL;
  fprintf(stderr, "vlmc-serve: listening on http://%s%s%s:%d (model %s)\n", ipv6 ? "[" : "",
          s->o->host, ipv6 ? "]" : "", port, s->model_id);
  fflush(stderr);
  int sig = 0;
  while (sigwait(stop_signals, &sig) != 0) {
  }
  fprintf(stderr, "vlmc-serve: %s: finishing the requests in flight\n",
          sig == SIGINT ? "SIGINT" : "SIGTERM");
  MHD_quiesce_daemon(d); /* stop accepting; the connections open go on */
  pthread_mutex_lock(&s->busy_mutex);
  while (s->busy > 0) pthread_cond_wait(&s->idle, &s->busy_mutex);
  pthread_mutex_unlock(&s->busy_mutex);
  MHD_stop_daemon(d);
  return NULL;
}

int main(int argc, char **argv) {
  serve_options_t o = {.host = "127.0.0.1", .port = 8080, .max_body = 32u << 20,
                       .timeout_s = 600};
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : 2;
  /* The stop signals are taken by sigwait in this thread: blocked before any thread starts
   * (they inherit the mask). A closed client socket is an error return, not a signal. */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  server_t s = {.o = &o};
  pthread_mutex_init(&s.generate_lock.mutex, NULL);
  pthread_cond_init(&s.generate_lock.turn, NULL);
  pthread_mutex_init(&s.busy_mutex, NULL);
  pthread_cond_init(&s.idle, NULL);
  model_id_of(o.session_options.artifact_path, s.model_id, sizeof s.model_id);
  vlmc_status_t status = vlmc_session_open(&o.session_options, &s.session);
  if (!status && !vlmc_session_has_tokenizer(s.session))
    status = vlmc_status_make(VLMC_UNSUPPORTED, "%s has no tokenizer: vlmc-serve answers text "
                              "prompts only", o.session_options.artifact_path);
  bool have_dir = false;
  if (!status) status = make_temp_dir(&s);
  if (!status) {
    have_dir = true;
    s.sampling = vlmc_session_default_sampling(s.session); /* as vlmc-run without flags */
    status = serve(&s, &stop_signals);
  }
  if (have_dir) rmdir(s.temp_dir);
  vlmc_session_destroy(s.session);
  return vlmc_status_report(status);
}
