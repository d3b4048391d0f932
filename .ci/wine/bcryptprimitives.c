/* A stand-in for Windows' bcryptprimitives.dll, for running Rust programs under Debian 12's
 * Wine 8.0, which lacks it (Rust's std has imported ProcessPrng from it since 1.78; Wine
 * ships the DLL from 9.x). Used by .ci/run only; never shipped. */
#include <windows.h>

/* advapi32's RtlGenRandom. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
