/* A stand-in for bcryptprimitives.dll, for the platform checks under wine only: Windows 10 and later
 * have it, and Rust's standard library takes its random bytes from its ProcessPrng, but wine 8.0
 * (Debian 12) does not have it. This one fills the buffer from RtlGenRandom (advapi32's
 * SystemFunction036), which wine has. Built with zig by tests/packaging/platforms.py. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size) {
    while (size > 0) {
        ULONG piece = size > 0x10000000 ? 0x10000000 : (ULONG)size;
        if (!SystemFunction036(data, piece)) {
            return FALSE;
        }
        data += piece;
        size -= piece;
    }
    return TRUE;
}
