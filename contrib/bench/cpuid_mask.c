/* Make a process (and the processes it starts) see a CPU without AVX-512 or VNNI.
 *
 * Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, on CPUs that list "cpuid_fault") turns each
 * CPUID instruction into a SIGSEGV. The handler runs the real CPUID with faulting briefly off,
 * clears the AVX-512, VNNI and AMX bits, and steps over the instruction. Libraries that pick
 * their kernels by CPUID (onnxruntime's MLAS, numpy, OpenBLAS) then run their AVX2 code on
 * this machine's cores: a stand-in for an AVX2-only CPU when none is at hand. glibc reads CPUID
 * before this constructor runs, so its own string functions keep their AVX-512 forms.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012

static long set_cpuid(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void cpuid_raw(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    if (leaf == 7 && sub == 0) {
        /* EBX: AVX512F, DQ, IFMA, PF, ER, CD, BW, VL */
        r[1] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        /* ECX: AVX512_VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        r[2] &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        /* EDX: 4VNNIW, 4FMAPS, VP2INTERSECT, AMX-BF16, AVX512_FP16, AMX-TILE, AMX-INT8 */
        r[3] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
    } else if (leaf == 7 && sub == 1) {
        /* EAX: AVX-VNNI, AVX512_BF16, AVX-IFMA; EDX: AVX-VNNI-INT8 */
        r[0] &= ~((1u << 4) | (1u << 5) | (1u << 23));
        r[3] &= ~(1u << 4);
    } else if (leaf == 0xd && sub == 0) {
        /* XSAVE state components: drop the AVX-512 ones (opmask, ZMM halves, ZMM16-31) */
        r[0] &= ~((1u << 5) | (1u << 6) | (1u << 7));
    }
}

static void on_segv(int sig, siginfo_t *info, void *ctx_) {
    ucontext_t *ctx = ctx_;
    greg_t *g = ctx->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2) { /* a real fault: let it kill the process as usual */
        signal(sig, SIG_DFL);
        return;
    }
    uint32_t r[4], leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX];
    set_cpuid(1);
    cpuid_raw(leaf, sub, r);
    set_cpuid(0);
    mask(leaf, sub, r);
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
    (void)info;
}

__attribute__((constructor)) static void start(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0 || set_cpuid(0) != 0) {
        fprintf(stderr, "cpuid_mask: this CPU or kernel has no CPUID faulting; nothing masked\n");
        if (getenv("CPUID_MASK_STRICT")) _exit(3);
    }
}
