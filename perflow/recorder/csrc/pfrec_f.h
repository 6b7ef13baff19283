/* perflow recorder: what the Fortran wrappers (pfrec_f.c, pfrec_rma_f.c) share. */
#ifndef PFREC_F_H
#define PFREC_F_H

#include "pfrec.h"

typedef MPI_Fint F;
#define FSTAT ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

#ifdef PF_F08
/* Built a second time with -DPF_F08 for the mpi_f08 module's procedures
 * (mpi_x_f08_ calling pmpi_x_f08_): their handles are structures holding one
 * MPI_Fint and their statuses have the layout of a Fortran status array, so
 * the same wrappers serve; their ierror argument is optional (may be NULL). */
#define F_NAME(x) x##_f08_
#define ALIASES(lc, UC, params)
#else
#define F_NAME(x) x##_
/* Every spelling Fortran compilers use for mpi_x: mpi_x_ is the definition. */
#define ALIASES(lc, UC, params)                                  \
    void lc params __attribute__((alias(#lc "_")));              \
    void lc##__ params __attribute__((alias(#lc "_")));          \
    void UC params __attribute__((alias(#lc "_")));
#endif
#define PMPI(lc, params) extern void F_NAME(p##lc) params __attribute__((weak));
#define IERR_OK (!ierr || *ierr == MPI_SUCCESS)

#endif
