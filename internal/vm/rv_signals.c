/*
 * rv_signals.c: signal handlers shared by Go and Ruby in one process, as
 * DESIGN.md records. Go's handlers are saved before Ruby boots
 * (rv_signals_save); after the boot, rv_signals_fix puts them back.
 */
#include "rv_internal.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

static struct sigaction go_actions[NSIG], ruby_faults[NSIG];

void rv_signals_save(void)
{
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, NULL, &go_actions[sig]);
}

static int is_fault(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
}

/* A fault on a Ruby thread is Ruby's to report ([BUG] with a backtrace); on
 * any other thread it is Go's (a nil dereference becomes a panic). */
static void fault_chain(int sig, siginfo_t *info, void *uctx)
{
    struct sigaction *next = ruby_native_thread_p() ? &ruby_faults[sig] : &go_actions[sig];
    if (next->sa_flags & SA_SIGINFO) {
        next->sa_sigaction(sig, info, uctx);
    } else if (next->sa_handler == SIG_DFL || next->sa_handler == SIG_IGN) {
        signal(sig, SIG_DFL);
        raise(sig);
    } else {
        next->sa_handler(sig);
    }
}

static int same_action(const struct sigaction *a, const struct sigaction *b)
{
    return a->sa_sigaction == b->sa_sigaction && a->sa_flags == b->sa_flags;
}

/* Ruby's boot replaced Go's handlers for HUP, TERM, ... (without SA_ONSTACK:
 * Go then crashes) and installed its own for faults, CHLD and VTALRM. Give
 * Go its handlers back, keep Ruby's CHLD and VTALRM (threads are interrupted
 * with VTALRM; backticks hang without CHLD) on the alternate stack, and chain
 * the fault handlers. */
void rv_signals_fix(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        struct sigaction now;
        if (sigaction(sig, NULL, &now) < 0 || same_action(&now, &go_actions[sig]))
            continue;
        if (sig == SIGVTALRM || sig == SIGCHLD) {
            now.sa_flags |= SA_ONSTACK;
            sigaction(sig, &now, NULL);
        } else if (is_fault(sig)) {
            ruby_faults[sig] = now;
            struct sigaction chain;
            memset(&chain, 0, sizeof chain);
            chain.sa_sigaction = fault_chain;
            chain.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
            sigfillset(&chain.sa_mask);
            sigaction(sig, &chain, NULL);
        } else {
            sigaction(sig, &go_actions[sig], NULL);
        }
    }
}

/* In a forked worker (rv_fork.c), once Go has started and installed its
 * handlers over those the VM had at the fork (was): Go's are saved as at a
 * boot, and the VM's own put back. */
void rv_signals_refix(const struct sigaction *was)
{
    rv_signals_save();
    int mine[] = {SIGVTALRM, SIGCHLD, rv_hold_signal()};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++)
        sigaction(mine[i], &was[mine[i]], NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (is_fault(sig))
            sigaction(sig, &was[sig], NULL);
}

/* Signals meant for the process go to Go's threads, never to this one. */
void rv_signals_block(void)
{
    sigset_t set;
    sigfillset(&set);
    int keep[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGVTALRM, rv_hold_signal()};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        sigdelset(&set, keep[i]);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* An app's Signal.trap installs Ruby's handler; keep it Go-safe. */
void rv_signal_fixup(int sig)
{
    struct sigaction now;
    if (sig > 0 && sig < NSIG && sigaction(sig, NULL, &now) == 0 && !(now.sa_flags & SA_ONSTACK)) {
        now.sa_flags |= SA_ONSTACK;
        sigaction(sig, &now, NULL);
    }
}
