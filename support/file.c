#define _POSIX_C_SOURCE 200809L
#include "support/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
                            S_ISDIR(st.st_mode)    ? "directory"
                            : S_ISFIFO(st.st_mode) ? "FIFO"
                            : S_ISCHR(st.st_mode)  ? "character device"
                            : S_ISBLK(st.st_mode)  ? "block device"
                            : S_ISSOCK(st.st_mode) ? "socket"
                                                   : "special file");
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

vlmc_status_t vlmc_file_write_all(const char *path, const void *data, size_t len) {
  FILE *stream = fopen(path, "wb");
  if (!stream)
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot create: %s", path, strerror(errno));
  size_t written = len ? fwrite(data, 1, len, stream) : 0;
  int close_failed = fclose(stream);
  if (written != len || close_failed)
    return vlmc_status_make(VLMC_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
  return NULL;
}

vlmc_status_t vlmc_file_map(const char *path, vlmc_mapped_file_t *out_file) {
  out_file->data = NULL;
  out_file->size = 0;
  int fd;
  uint64_t size;
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
