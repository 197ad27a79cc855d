#define _POSIX_C_SOURCE 200809L
#include "support/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "support/hash.h"
#include "support/strbuf.h"

static vlmc_status_t read_stream(FILE *stream, const char *path, char **out_data, size_t *out_len) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  char chunk[65536];
  size_t n;
  /* Stops at the first failed append: reading on would only discard data (or never end, on
   * an endless stream). */
  while (!buf.failed && (n = fread(chunk, 1, sizeof chunk, stream)) > 0)
    vlmc_strbuf_append(&buf, chunk, n);
  if (buf.failed) {
    vlmc_strbuf_deinit(&buf);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory reading file", path);
  }
  if (ferror(stream)) {
    vlmc_strbuf_deinit(&buf);
    return vlmc_status_make(VLMC_IO_ERROR, "%s: read failed: %s", path, strerror(errno));
  }
  size_t len = buf.len;
  char *data = vlmc_strbuf_take(&buf);
  if (!data) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory reading file", path);
  *out_data = data;
  *out_len = len;
  return NULL;
}

static const char *file_type_name(mode_t mode) {
  return S_ISDIR(mode)    ? "directory"
         : S_ISFIFO(mode) ? "FIFO"
         : S_ISCHR(mode)  ? "character device"
         : S_ISBLK(mode)  ? "block device"
         : S_ISSOCK(mode) ? "socket"
                          : "special file";
}

vlmc_status_t vlmc_file_open_regular(const char *path, int *out_fd, uint64_t *out_size) {
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return vlmc_status_make(VLMC_IO_ERROR, "%s: not a regular file (a %s)", path,
                            file_type_name(st.st_mode));
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *out_fd = fd;
  *out_size = (uint64_t)st.st_size;
  return NULL;
}

vlmc_status_t vlmc_file_read_all(const char *path, char **out_data, size_t *out_len) {
  if (strcmp(path, "-") == 0) return read_stream(stdin, "<stdin>", out_data, out_len);
  int fd;
  uint64_t size;
  VLMC_RETURN_IF_ERROR(vlmc_file_open_regular(path, &fd, &size));
  FILE *stream = fdopen(fd, "rb");
  if (!stream) {
    close(fd);
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
  }
  vlmc_status_t status = read_stream(stream, path, out_data, out_len);
  fclose(stream);
  return status;
}

/* ---- outputs: a temporary file beside the target, renamed over it when complete ---- */

/* Renaming over a FIFO or a device would replace it with a file (or, for root, replace
 * /dev/null): only a missing target or a regular file is replaced. */
static vlmc_status_t check_replaceable(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return NULL;
  return vlmc_status_make(VLMC_IO_ERROR, "%s: not a regular file (a %s); vlmc writes outputs "
                          "as new files, give a file name", path, file_type_name(st.st_mode));
}

/* "DIR/.NAME." for the target "DIR/NAME" (".NAME." in the current folder); six name
 * characters go after it. */
static char *temp_prefix(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  const char *base = path + dir_len;
  size_t base_len = strlen(base);
  char *prefix = malloc(dir_len + base_len + 2 + 6 + 1);
  if (!prefix) return NULL;
  memcpy(prefix, path, dir_len);
  prefix[dir_len] = '.';
  memcpy(prefix + dir_len + 1, base, base_len);
  memcpy(prefix + dir_len + 1 + base_len, ".", 2);
  return prefix;
}

/* Creates a new file named prefix + six letters with O_EXCL. Not mkstemp: its mode is 0600,
 * and an artifact should get the usual 0666 less the umask, as a file made by fopen does. */
static vlmc_status_t create_temp(const char *target, char *name, int *out_fd) {
  static const char kLetters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static _Atomic unsigned counter; /* outputs may be opened from several threads */
  size_t end = strlen(name);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t seed = (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 32) ^ ++counter;
    uint64_t bits = vlmc_xxh64(&seed, sizeof seed, (uint64_t)attempt);
    for (int i = 0; i < 6; ++i, bits /= 62) name[end + (size_t)i] = kLetters[bits % 62];
    name[end + 6] = '\0';
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      *out_fd = fd;
      return NULL;
    }
    if (errno != EEXIST) break;
  }
  return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot create a temporary file beside it (%s): %s",
                          target, name, strerror(errno));
}

static void output_release(vlmc_output_t *output) {
  free(output->target);
  free(output->temp);
  memset(output, 0, sizeof *output);
}

vlmc_status_t vlmc_output_open(const char *path, vlmc_output_t *out) {
  memset(out, 0, sizeof *out);
  VLMC_RETURN_IF_ERROR(check_replaceable(path));
  out->target = malloc(strlen(path) + 1);
  out->temp = temp_prefix(path);
  if (!out->target || !out->temp) {
    output_release(out);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  strcpy(out->target, path);
  int fd = -1;
  vlmc_status_t status = create_temp(path, out->temp, &fd);
  if (!status && !(out->stream = fdopen(fd, "wb"))) {
    status = vlmc_status_make(VLMC_IO_ERROR, "%s: cannot open: %s", out->temp, strerror(errno));
    close(fd);
    unlink(out->temp);
  }
  if (status) output_release(out);
  return status;
}

/* The rename itself is made durable too: without the folder's fsync a crash could leave the
 * old name. Best effort: some file systems refuse fsync on a folder. */
static void sync_parent(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(dir);
}

vlmc_status_t vlmc_output_commit(vlmc_output_t *output) {
  vlmc_status_t status = NULL;
  if (fflush(output->stream) != 0 || fsync(fileno(output->stream)) != 0)
    status = vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", output->target,
                              strerror(errno));
  if (fclose(output->stream) != 0 && !status)
    status = vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", output->target,
                              strerror(errno));
  output->stream = NULL;
  if (!status && rename(output->temp, output->target) != 0)
    status = vlmc_status_make(VLMC_IO_ERROR, "%s: cannot replace it with %s: %s", output->target,
                              output->temp, strerror(errno));
  if (status) unlink(output->temp);
  else sync_parent(output->target);
  output_release(output);
  return status;
}

void vlmc_output_discard(vlmc_output_t *output) {
  if (output->stream) fclose(output->stream);
  if (output->temp) unlink(output->temp);
  output_release(output);
}

vlmc_status_t vlmc_file_write_all(const char *path, const void *data, size_t len) {
  vlmc_output_t output;
  VLMC_RETURN_IF_ERROR(vlmc_output_open(path, &output));
  if (len && fwrite(data, 1, len, output.stream) != len) {
    vlmc_status_t status =
        vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
    vlmc_output_discard(&output);
    return status;
  }
  return vlmc_output_commit(&output);
}

vlmc_status_t vlmc_file_map(const char *path, vlmc_mapped_file_t *out_file) {
  out_file->data = NULL;
  out_file->size = 0;
  int fd = -1;     /* set on success; initialized for GCC's -O3 flow analysis */
  uint64_t size = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_open_regular(path, &fd, &size));
  if (size > (uint64_t)SIZE_MAX) {
    close(fd);
    return vlmc_status_make(VLMC_IO_ERROR, "%s: too large to map", path);
  }
  struct stat st = {.st_size = (off_t)size};
  if (st.st_size > 0) {
    void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      close(fd);
      return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot map: %s", path, strerror(errno));
    }
    out_file->data = data;
    out_file->size = (size_t)st.st_size;
  }
  close(fd);
  return NULL;
}

void vlmc_file_unmap(vlmc_mapped_file_t *file) {
  if (file->data) munmap((void *)file->data, file->size);
  file->data = NULL;
  file->size = 0;
}

vlmc_status_t vlmc_file_mkdirs(const char *path) {
  size_t len = strlen(path);
  char *copy = malloc(len + 1);
  if (!copy) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  memcpy(copy, path, len + 1);
  for (size_t i = 1; i <= len; ++i) {
    if (copy[i] != '/' && copy[i] != '\0') continue;
    char saved = copy[i];
    copy[i] = '\0';
    if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
      vlmc_status_t status =
          vlmc_status_make(VLMC_IO_ERROR, "%s: cannot create directory: %s", copy, strerror(errno));
      free(copy);
      return status;
    }
    copy[i] = saved;
  }
  free(copy);
  return NULL;
}

char *vlmc_path_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *path = malloc(a + b + 2);
  if (!path) return NULL;
  memcpy(path, dir, a);
  size_t used = a;
  if (a && dir[a - 1] != '/') path[used++] = '/';
  memcpy(path + used, name, b + 1);
  return path;
}
