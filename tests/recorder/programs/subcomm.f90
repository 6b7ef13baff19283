! A sub-communicator (Fortran): split the world into even and odd ranks; in
! each half rank 1 broadcasts, everyone allreduces, rank 0 sends to rank 1 (tag 5).
program subcomm
  use mpi
  implicit none
  integer :: wrank, wsize, rank, nproc, ierr, half, v, total
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, wrank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, wsize, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(wrank, 2), wrank, half, ierr) ! SITE:f_split
  call MPI_Comm_rank(half, rank, ierr)
  call MPI_Comm_size(half, nproc, ierr)
  v = wrank * 10
  call MPI_Bcast(v, 1, MPI_INTEGER, mod(1, nproc), half, ierr) ! SITE:f_bcast
  call MPI_Allreduce(wrank, total, 1, MPI_INTEGER, MPI_SUM, half, ierr) ! SITE:f_sub_allreduce
  if (nproc > 1 .and. rank == 0) call MPI_Send(total, 1, MPI_INTEGER, 1, 5, half, ierr) ! SITE:f_sub_send
  if (nproc > 1 .and. rank == 1) call MPI_Recv(v, 1, MPI_INTEGER, 0, 5, half, MPI_STATUS_IGNORE, ierr)
  call MPI_Comm_free(half, ierr)
  if (wrank < 2) print '(a,i0,a,i0,a,i0,a,i0)', 'subcomm.f90: world rank ', wrank, ', half ', rank, ' of ', nproc, &
    ', sum ', total
  call MPI_Finalize(ierr)
end program subcomm
