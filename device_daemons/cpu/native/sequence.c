/* A run of oneDNN primitives executed back to back from C (onednn/sequence.py): one
 * call from Python for the whole run instead of one per primitive (why: see there).
 * `execute` is libdnnl's dnnl_primitive_execute, passed in by address: this file
 * links nothing. */
#include <stdint.h>

typedef int (*execute_fn)(void *primitive, void *stream, int nargs, const void *args);

/* Runs prims[0 .. count) on `stream`, prims[i] with nargs[i] arguments at args[i].
 * Returns -1 when all ran, else the index of the first that failed (its status in *status;
 * the ones after it did not run). */
int64_t mo_run_sequence(uintptr_t execute, const uintptr_t *prims, uintptr_t stream, const int32_t *nargs,
                        const uintptr_t *args, int64_t count, int32_t *status)
{
    execute_fn run = (execute_fn)execute;
    for (int64_t i = 0; i < count; ++i) {
        int s = run((void *)prims[i], (void *)stream, nargs[i], (const void *)args[i]);
        if (s) {
            *status = s;
            return i;
        }
    }
    return -1;
}
