/* emit_package_tree.c: what an emitted package copies of flaretune's sources, and the tree it
 * is written in (emit_package.h; docs/emit.md, "--format package").
 *
 * The tree is written into a temporary sibling of the target, locked while it is written, and
 * renamed into place by emit_package.c; on any error it is removed, so the target either
 * appears whole or not at all. Temporary trees that killed emits left are removed by the next
 * emit to the same target.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/npy.h"
#include "core/paths.h"
#include "profiles/src/emit_package.h"

/* ---- what a package copies ----------------------------------------------------------------- */

/* Paths under ft_source_root(), copied to the same paths under the package's src/. The CPU
 * kernels call the workspace, the error records and OpenBLAS; the dispatch binds and checks a
 * call with op.c and attrs.c as `flaretune exec` does, which need tensors, the clock (the
 * watchdog's deadline in a call) and (for the random fills the descriptions carry) the
 * generator. Found by the undefined symbols of these objects;
 * a package that misses one does not link, which test_package checks. */
const char *const ft_pkg_common[] = {
    "kernels/op/backend.h",
    "core/clock.h",
    "kernels/op/op.h",
    "core/rng.h",
    "core/sanitize.h",
    "kernels/op/space.h",
    "core/status.h",
    "core/tensor.h",
    "core/workspace.h",
    "kernels/cpu/cpu.h",
    "core/clock.c",
    "core/rng.c",
    "core/status.c",
    "core/tensor.c",
    "core/workspace.c",
    "kernels/op/attrs.c",
    "kernels/op/op.c",
    NULL,
};

/* What a CUDA package copies besides ft_pkg_common: the CUDA platform's host code (the backend,
 * the device layer for the GPU and the emulator, the kernel cache and NVRTC, cuBLASLt's GEMM,
 * the timer, the facts and predictions the backend's table names) with the SIMT emulator and
 * its headers, the dialect header, and the part of core/ and kernels/op/ they need. Found by the
 * undefined symbols of the backend and the ops' *_cuda.c; test_package builds the result. */
const char *const ft_pkg_cuda_common[] = {
    "kernels/cuda/device.h",
    "core/env.h",
    "core/epitaph.h",
    "core/paths.h",
    "core/stats.h",
    "core/env.c",
    "core/epitaph.c",
    "core/paths.c",
    "kernels/op/backend.c",
    "kernels/op/space.c",
    "kernels/cuda/ft_cuda.h",
    "kernels/cuda/context.h",
    "kernels/cuda/runtime.h",
    "kernels/cuda/backend/cuda_backend.h",
    "kernels/cuda/device_emu.h",
    "kernels/cuda/device_impl.h",
    "kernels/cuda/emu_guard.h",
    "kernels/cuda/kcache.h",
    "kernels/cuda/analysis/kfacts.h",
    "kernels/cuda/nvrtc.h",
    "kernels/cuda/analysis/predict.h",
    "kernels/cuda/backend/prefetch.h",
    "kernels/cuda/analysis/sass.h",
    "kernels/cuda/specs.h",
    "kernels/cuda/timer.h",
    "kernels/cuda/context.c",
    "kernels/cuda/backend/cuda_backend.c",
    "kernels/cuda/device.c",
    "kernels/cuda/device_emu.c",
    "kernels/cuda/emu_guard.c",
    "kernels/cuda/gemm.c",
    "kernels/cuda/kcache.c",
    "kernels/cuda/analysis/kfacts.c",
    "kernels/cuda/analysis/predict.c",
    "kernels/cuda/backend/prefetch.c",
    "kernels/cuda/analysis/sass.c",
    "kernels/cuda/specs.c",
    "kernels/cuda/emu/emu.h",
    "kernels/cuda/emu/ft_emu.h",
    "kernels/cuda/emu/ft_emu_abi.h",
    "kernels/cuda/emu/prof.h",
    "kernels/cuda/emu/emu.c",
    "kernels/cuda/emu/prof.c",
    "kernels/cuda/emu/include/cooperative_groups.h",
    "kernels/cuda/emu/include/cuda_awbarrier.h",
    "kernels/cuda/emu/include/cuda_bf16.h",
    "kernels/cuda/emu/include/cuda_fp16.h",
    "kernels/cuda/emu/include/cuda_fp8.h",
    "kernels/cuda/emu/include/cuda_pipeline.h",
    "kernels/cuda/emu/include/mma.h",
    "kernels/cuda/emu/include/cuda/barrier",
    "kernels/cuda/emu/include/cuda/pipeline",
    "kernels/cuda/emu/include/cuda/ptx",
    NULL,
};

/* The files of ft_pkg_cuda_common that call the CUDA toolkit's libraries: the package's CMake
 * compiles them only when it finds the toolkit (as flaretune's does). */
const char *const ft_pkg_cuda_gpu[] = {
    "kernels/cuda/device_cuda.c",
    "kernels/cuda/nvrtc.c",
    "kernels/cuda/timer.c",
    NULL,
};

const ft_pkg_family ft_pkg_families[FT_PKG_NFAMILIES] = {
    {"fusion",
     {"kernels/fusion/fusion.h", "kernels/fusion/fusion_ref.h", "kernels/fusion/fusion_op.c",
      "kernels/fusion/fusion_ref.c", "kernels/fusion/fusion_cpu.c"},
     {"ft_cuda_fusion_dflare", "ft_cuda_fusion_dflash"},
     {"kernels/fusion/fusion_cuda.c", "kernels/fusion/fusion.cu"},
     {"ft_cpu_fusion_dflare", "ft_cpu_fusion_dflash"}},
    {"attention",
     {"kernels/attention/attention.h", "kernels/attention/attention_ref.h",
      "kernels/attention/attention_op.c", "kernels/attention/attention_ref.c",
      "kernels/attention/rope.c", "kernels/op/preset.c", "kernels/attention/kvproj_cpu.c",
      "kernels/attention/decode_cpu.c", "kernels/attention/train_cpu.c"},
     {"ft_cuda_attention_kvproj", "ft_cuda_attention_decode", "ft_cuda_attention_train"},
     {"kernels/attention/attention_cuda.c", "kernels/attention/train_cuda.c",
      "kernels/attention/kvproj.cu", "kernels/attention/attention_decode.cu",
      "kernels/attention/attention_train.cu"},
     {"ft_cpu_attention_kvproj", "ft_cpu_attention_decode", "ft_cpu_attention_train"}},
    {"loss",
     {"kernels/loss/loss.h", "kernels/loss/loss_ref.h", "kernels/loss/loss_op.c",
      "kernels/loss/loss_ref.c", "kernels/loss/loss_weights.c", "kernels/loss/loss_cpu.c"},
     {"ft_cuda_loss"},
     {"kernels/loss/loss_cuda.c", "kernels/loss/loss.cu"},
     {"ft_cpu_loss"}},
    {"linear",
     {"kernels/linear/linear.h", "kernels/linear/linear_op.c", "kernels/linear/linear_cpu.c"},
     {"ft_cuda_linear"},
     {"kernels/linear/linear_cuda.c"},
     {"ft_cpu_linear"}},
};

/* ---- the tree ------------------------------------------------------------------------------ */

void ft_pkg_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char sub[4096];
            if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) < (int)sizeof sub)
                ft_pkg_remove_tree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* A new file at rel under the tree (its folders made). */
static FILE *pkg_open(const ft_pkg *k, const char *rel, char *path, size_t n, ft_err *err) {
    if (snprintf(path, n, "%s/%s", k->tmp, rel) >= (int)n) {
        ft_err_set(err, FT_EINVAL, "%s: path too long", k->tmp);
        return NULL;
    }
    char dir[4352];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (ft_dir_make(dir, err)) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) ft_err_set(err, FT_EIO, "%s: %s", path, strerror(errno));
    return f;
}

/* Close a file of the tree; a write that failed (now or before: a full disk, a file size limit)
 * is an error that says why. */
static ft_status pkg_close(FILE *f, const char *path, ft_err *err) {
    int before = errno, bad = ferror(f), e = 0;
    if (fflush(f) != 0) e = errno; /* the buffered bytes, tried again: the reason, again */
    if (fclose(f) != 0 && !e) e = errno;
    if (!bad && !e) return FT_OK;
    if (!e) e = before ? before : EIO;
    return ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(e));
}

ft_status ft_pkg_copy(const ft_pkg *k, const char *rel, ft_err *err) {
    char from[4096], to[4096], dst[4200];
    if (snprintf(from, sizeof from, "%s/%s", ft_source_root(), rel) >= (int)sizeof from)
        return ft_err_set(err, FT_EINVAL, "%s: path too long", ft_source_root());
    snprintf(dst, sizeof dst, "src/%s", rel);
    FILE *in = fopen(from, "rb");
    if (!in)
        return ft_err_set(err, FT_EIO, "kernel source %s: %s (set FLARETUNE_SOURCE_DIR?)", from,
                          strerror(errno));
    FILE *out = pkg_open(k, dst, to, sizeof to, err);
    if (!out) {
        fclose(in);
        return err ? err->status : FT_EIO;
    }
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, got, out) != got) break;
    int bad = ferror(in);
    fclose(in);
    ft_status s = pkg_close(out, to, err);
    return s ? s : bad ? ft_err_set(err, FT_EIO, "%s: read failed", from) : FT_OK;
}

ft_status ft_pkg_write(const ft_pkg *k, const char *rel, const void *data, size_t len,
                       ft_err *err) {
    char path[4352];
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fwrite(data, 1, len, f);
    return pkg_close(f, path, err);
}

/* dir must not exist, or be an empty directory (a link to one is followed: *real is then the
 * directory it names, else dir itself). *mode: an existing directory's permissions, which the
 * package keeps (-1: none; the new directory then gets the umask's). */
ft_status ft_pkg_check_target(const char *dir, char *real, size_t n, int *mode, ft_err *err) {
    struct stat st, lst;
    *mode = -1;
    snprintf(real, n, "%s", dir);
    if (!dir[0]) return ft_err_set(err, FT_EINVAL, "-o: the directory's path is empty");
    if (lstat(dir, &lst) != 0)
        return errno == ENOENT ? FT_OK : ft_err_set(err, FT_EIO, "%s: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0)
        return ft_err_set(err, FT_EIO, "%s is a symbolic link to %s", dir,
                          errno == ENOENT ? "nothing (a dangling link): remove it or name a "
                                            "directory"
                                          : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s exists and is not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return ft_err_set(err, FT_EIO, "%s: %s", dir, strerror(errno));
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)) != NULL)
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    if (!empty) return ft_err_set(err, FT_EIO, "%s exists and is not empty (nothing written)", dir);
    if (S_ISLNK(lst.st_mode)) {
        char *r = realpath(dir, NULL);
        if (!r) return ft_err_set(err, FT_EIO, "%s: %s", dir, strerror(errno));
        if (strlen(r) >= n) {
            free(r);
            return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
        }
        snprintf(real, n, "%s", r);
        free(r);
    }
    *mode = (int)(st.st_mode & 07777);
    return FT_OK;
}

/* Temporary trees of earlier emits to the same target that ended without removing theirs
 * (killed): `.BASE.tmp-XXXXXX` beside it, a directory of this user that no process holds (an
 * emit holds its own tree's flock until it is renamed into place or removed). */
static void remove_stale(const char *parent, const char *base) {
    DIR *d = opendir(parent);
    if (!d) return;
    char stem[512];
    if (snprintf(stem, sizeof stem, ".%s.tmp-", base) >= (int)sizeof stem) {
        closedir(d);
        return; /* no name that long (ft_pkg_make_tmp takes 200 bytes at most) */
    }
    size_t sl = strlen(stem);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strncmp(nm, stem, sl) != 0 || strlen(nm) != sl + 6) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", parent, nm) >= (int)sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) ft_pkg_remove_tree(path);
        close(fd);
    }
    closedir(d);
}

/* A fresh temporary directory beside dir (its parent made), locked, after the stale ones of
 * killed emits are removed. It is made as mkdir makes a directory (the umask's permissions). */
ft_status ft_pkg_make_tmp(ft_pkg *k, const char *dir, ft_err *err) {
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    size_t len = strlen(parent);
    while (len > 1 && parent[len - 1] == '/')
        parent[--len] = '\0';
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    if (!base[0] || !strcmp(base, ".") || !strcmp(base, ".."))
        return ft_err_set(err, FT_EINVAL, "%s: name a new directory", dir);
    if (strlen(base) > 200 ||
        snprintf(k->tmp, sizeof k->tmp, "%.*s.%s.tmp-XXXXXX", (int)(base - parent), parent, base) >=
            (int)sizeof k->tmp - 64)
        return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
    char where[4096]; /* the parent, made where it is a folder of its own */
    ft_path_dir(parent, where, sizeof where);
    if (slash && slash != parent) {
        ft_status s = ft_dir_make(where, err);
        if (s) return s;
    }
    remove_stale(where, base);
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char *x = k->tmp + strlen(k->tmp) - 6;
    uint64_t r = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)k;
    for (int tries = 0;; tries++) {
        for (int i = 0; i < 6; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = digits[(r >> 33) % (sizeof digits - 1)];
        }
        if (mkdir(k->tmp, 0777) == 0) break;
        if (errno != EEXIST || tries > 100) {
            int e = errno;
            k->tmp[0] = '\0';
            return ft_err_set(err, FT_EIO, "%s: cannot make a temporary directory beside it: %s",
                              dir, strerror(e));
        }
    }
    k->tmp_fd = open(k->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (k->tmp_fd >= 0) flock(k->tmp_fd, LOCK_EX);
    return FT_OK;
}
