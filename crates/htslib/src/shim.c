/* Accessors for the parts of htslib's structs that sortase-htslib keeps opaque on the Rust side. */
#include "htslib/hts.h"

/* The CRAM decoder state of an open CRAM file (htsFile's `fp.cram`), for cram_seek. */
struct cram_fd *sortase_hts_cram_fd(htsFile *fp)
{
    return fp->is_cram ? fp->fp.cram : NULL;
}
