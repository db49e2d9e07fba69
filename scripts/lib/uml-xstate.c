/*
 * Preloaded into the user-mode Linux kernel (scripts/vdevice) so that it runs on hosts whose
 * CPUs have large extended register state (e.g. AMX: 11008 bytes of XSAVE area).
 *
 * UML saves and restores each guest process's FPU state with ptrace's NT_X86_XSTATE regset,
 * through a buffer sized for the register state it knows. The host kernel hands back a shorter
 * read as asked, but refuses a write (EFAULT) that is not the whole XSAVE area of this host, so
 * the guest's first process dies of SIGSEGV and the guest panics at boot. Here a short write is
 * made whole: the process's current full state is read, the caller's bytes laid over its start,
 * and the whole area written. Every other ptrace request goes to libc unchanged.
 *
 * UML's kernel runs on one host thread for its processes' ptrace calls, and on small stacks of
 * its own, so the full-size buffer is static, not on the stack.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

static unsigned char whole[64 * 1024];

typedef long (*ptrace_fn)(enum __ptrace_request, pid_t, void *, void *);

long ptrace(enum __ptrace_request request, ...)
{
	static ptrace_fn real;
	va_list ap;
	va_start(ap, request);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *);
	void *data = va_arg(ap, void *);
	va_end(ap);
	if (real == NULL)
		real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
	if (request != PTRACE_SETREGSET || (long)addr != NT_X86_XSTATE)
		return real(request, pid, addr, data);
	struct iovec *given = data;
	struct iovec full = { whole, sizeof(whole) };
	if (real(PTRACE_GETREGSET, pid, addr, &full) < 0 || given->iov_len >= full.iov_len)
		return real(request, pid, addr, data);
	memcpy(whole, given->iov_base, given->iov_len);
	return real(PTRACE_SETREGSET, pid, addr, &full);
}
