/* Each thread of the calling thread's OpenMP team on a CPU of its own while a request runs
 * on the whole team (onednn/compiler.py's NativeProgram; team_pinning.py says why). The
 * team's thread i goes to the i-th CPU of the list counted from the one the calling thread
 * runs on now, so the calling thread stays where it woke up; mo_unpin gives the calling
 * thread the whole list back after the request (the team's other threads run only in its
 * regions: they stay where they are). */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>

static void only(cpu_set_t *set, int cpu)
{
    CPU_ZERO(set);
    if (cpu >= 0 && cpu < CPU_SETSIZE)
        CPU_SET(cpu, set);
}

/* cpus: the n CPUs of the process's affinity mask. Returns 0, or -1 when a thread could not
 * be pinned (the request runs unpinned then). */
int mo_pin_team(const int *cpus, int n)
{
    int here = sched_getcpu(), start = 0;
    for (int i = 0; i < n; ++i)
        if (cpus[i] == here)
            start = i;
    int failed = 0;
    #pragma omp parallel reduction(|:failed)
    {
        cpu_set_t set;
        only(&set, cpus[(start + omp_get_thread_num()) % n]);
        failed = sched_setaffinity(0, sizeof set, &set) != 0;
    }
    return failed ? -1 : 0;
}

/* The calling thread may run on any of the n CPUs again. Returns 0, or -1. */
int mo_unpin(const int *cpus, int n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n; ++i)
        if (cpus[i] >= 0 && cpus[i] < CPU_SETSIZE)
            CPU_SET(cpus[i], &set);
    return sched_setaffinity(0, sizeof set, &set) ? -1 : 0;
}
