! MPI one-sided communication from Fortran (mpi_f08): each rank puts 100 doubles into the next rank's
! window in each of 3 fence epochs (C counterpart: rma_fence.c).
program rma_fence_f
  use mpi_f08
  implicit none
  integer :: rank, size, i
  type(MPI_Win) :: win
  double precision :: buf(100), tgt(100)
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  buf = rank
  wsize = 800
  disp = 0
  call MPI_Win_create(tgt, wsize, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win)
  do i = 1, 3
    call MPI_Win_fence(0, win)
    call MPI_Put(buf, 100, MPI_DOUBLE_PRECISION, mod(rank + 1, size), disp, 100, MPI_DOUBLE_PRECISION, win)
    call MPI_Win_fence(0, win)
  end do
  call MPI_Win_free(win)
  if (rank == 0) print '(a)', 'rma_fence_f: done'
  call MPI_Finalize()
end program
