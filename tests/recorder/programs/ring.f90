! Ring with a non-blocking halo exchange (Fortran, include 'mpif.h'): each rank
! sends N doubles to its right neighbour (tag 7) and receives from its left one.
subroutine halo(sendb, recvb, n, left, right)
  implicit none
  include 'mpif.h'
  integer, intent(in) :: n, left, right
  double precision, intent(in) :: sendb(n)
  double precision, intent(out) :: recvb(n)
  integer :: req(2), ierr
  call MPI_Irecv(recvb, n, MPI_DOUBLE_PRECISION, left, 7, MPI_COMM_WORLD, req(1), ierr) ! SITE:f_halo_irecv
  call MPI_Isend(sendb, n, MPI_DOUBLE_PRECISION, right, 7, MPI_COMM_WORLD, req(2), ierr) ! SITE:f_halo_isend
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr) ! SITE:f_halo_waitall
end subroutine halo

program ring
  implicit none
  include 'mpif.h'
  integer :: rank, nproc, ierr, it, iter, n
  double precision, allocatable :: a(:), b(:)
  double precision :: s, tot
  character(len=32) :: arg
  iter = 20
  n = 1000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iter
  end if
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  allocate (a(n), b(n))
  a = rank
  s = 0
  do it = 1, iter
    call halo(a, b, n, mod(rank + nproc - 1, nproc), mod(rank + 1, nproc))
    s = s + sum(b)
  end do
  call MPI_Reduce(s, tot, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a,f12.1)', 'ring.f90: ', nproc, ' ranks, checksum ', tot
  call MPI_Finalize(ierr)
end program ring
