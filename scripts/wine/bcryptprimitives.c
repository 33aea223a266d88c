/* A stand-in for Windows' bcryptprimitives.dll inside the Wine prefix of `npm run test:windows`
 * only (never shipped). Rust's std (1.78+) takes its randomness from ProcessPrng in that DLL, which
 * every Windows 10 has and Debian's Wine 8.0 does not: without it the addon does not load under Wine
 * ("Module not found"). Same contract as Windows' own: fill the buffer, always TRUE. */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
