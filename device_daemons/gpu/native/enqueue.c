/* The device launches of a GPU request, enqueued from C in one call: no event
 * object per launch (pyopencl's enqueue makes one for each) and no Python between
 * launches. The kernels' arguments are set once, when the request is made.
 * enqueue is the ICD loader's clEnqueueNDRangeKernel (the loader dispatches on
 * the queue's own driver). Returns 0, or the first OpenCL error with *failed the
 * index of the launch that failed (the ones before it are enqueued). */
#include <stddef.h>
#include <stdint.h>

typedef int32_t (*enqueue_fn)(void *queue, void *kernel, uint32_t dims, const size_t *offset, const size_t *global,
                              const size_t *local, uint32_t waits, const void *wait_list, void *event);

int32_t mo_enqueue_launches(void *enqueue, void *queue, int64_t count, void *const *kernels, const uint32_t *dims,
                            const size_t *global, const size_t *local, const uint8_t *has_local, int64_t *failed)
{
    enqueue_fn call = (enqueue_fn)enqueue;
    for (int64_t i = 0; i < count; ++i) {
        int32_t err = call(queue, kernels[i], dims[i], NULL, global + 3 * i, has_local[i] ? local + 3 * i : NULL,
                           0, NULL, NULL);
        if (err != 0) {
            *failed = i;
            return err;
        }
    }
    return 0;
}
