/* Blocking calls as database drivers make them, for tests and benchmarks. */
#include <errno.h>
#include <ruby.h>
#include <ruby/thread.h>
#include <time.h>

/* Sleeps the whole time even when a signal interrupts it. */
static void *nap(void *ms)
{
    struct timespec left = {(time_t)((uintptr_t)ms / 1000), (long)((uintptr_t)ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* Blocks after releasing the GVL: other Ruby threads run meanwhile. */
static VALUE sleep_nogvl(VALUE self, VALUE ms)
{
    (void)self;
    rb_thread_call_without_gvl(nap, (void *)(uintptr_t)NUM2UINT(ms), RUBY_UBF_IO, NULL);
    return Qnil;
}

/* Blocks holding the GVL: nothing else in the VM runs. */
static VALUE sleep_gvl(VALUE self, VALUE ms)
{
    (void)self;
    nap((void *)(uintptr_t)NUM2UINT(ms));
    return Qnil;
}

void Init_blocking(void)
{
    VALUE m = rb_define_module("Blocking");
    rb_define_module_function(m, "sleep_nogvl", sleep_nogvl, 1);
    rb_define_module_function(m, "sleep_gvl", sleep_gvl, 1);
}
