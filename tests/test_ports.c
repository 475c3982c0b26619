/* The kernel-port tables (backends/ports.h), every one of them: each port names itself, what it
 * does and its fallback; selecting it for every backend kind gives either the kernel or
 * CELER_ERR_UNSUPPORTED naming that fallback (never a crash or a silent NULL); a kind that does
 * not exist is refused; and the GPU library of a GPU build fills its kind's slot of every port. */
#include "backends/ports.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static int walk(void)
{
    int n = 0;
    for (const celer_port *const *pp = celer_ports; *pp; pp++, n++) {
        const celer_port *p = *pp;
        CHECK(p->name && *p->name && p->does && *p->does && p->fallback && *p->fallback);
        for (int k = 0; k < CELER_BACKEND_KIND_COUNT; k++) {
            celer_port_fn fn  = (celer_port_fn)1;
            celer_error   err = {0};
            celer_status  st  = celer_port_select(p, (celer_backend_kind)k, &fn, &err);
            CHECK(st == CELER_OK || st == CELER_ERR_UNSUPPORTED);
            CHECK((st == CELER_OK) == (fn != NULL));
            CHECK(fn == p->impl[k]);
            if (st) CHECK(strstr(err.msg, p->fallback) && strstr(err.msg, p->name));
        }
        /* the CPU runs every fallback: it has no fused kernel of its own */
        CHECK(p->impl[CELER_BACKEND_CPU] == NULL);
#if CELER_HAVE_GPU
        CHECK(p->impl[CELER_GPU_BACKEND_KIND] != NULL);
#endif
        celer_port_fn fn;
        celer_error   err = {0};
        CHECK(celer_port_select(p, CELER_BACKEND_KIND_COUNT, &fn, &err) == CELER_ERR_INVALID && fn == NULL);
    }
    CHECK(n >= 3);
    /* the ports the forward pass uses are in the list */
    bool add = false, rope = false, mm = false, rt = false, ma = false, mg = false, nr = false, fa = false;
    for (const celer_port *const *pp = celer_ports; *pp; pp++)
        add |= *pp == &celer_port_add_rmsnorm, rope |= *pp == &celer_port_attn_inputs, mm |= *pp == &celer_port_matmuls,
            rt |= *pp == &celer_port_moe_router, ma |= *pp == &celer_port_matmul_add, mg |= *pp == &celer_port_matmul_glu,
            nr |= *pp == &celer_port_norm_router, fa |= *pp == &celer_port_moe_ffn_add;
    CHECK(add && rope && mm && rt && ma && mg && nr && fa);
    printf("test_ports: %d ports walked\n", n);
    return 0;
}

int main(void) { return walk(); }
