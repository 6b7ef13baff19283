! Imbalanced compute before an allreduce (Fortran): the last rank computes
! SLOW times longer in compute_slow than the others in compute.
module work
  implicit none
contains
  double precision function compute(n)
    integer(8), intent(in) :: n
    integer(8) :: i
    compute = 0
    do i = 1, n
      compute = compute + 1d0 / (dble(i) * dble(i))
    end do
  end function compute
  double precision function compute_slow(n)
    integer(8), intent(in) :: n
    integer(8) :: i
    compute_slow = 0
    do i = 1, n
      compute_slow = compute_slow + 1d0 / (dble(i) * dble(i) + 1d0)
    end do
  end function compute_slow
end module work

program imbalance
  use mpi
  use work
  implicit none
  integer :: rank, nproc, ierr, it
  integer(8) :: n = 20000000_8
  double precision :: s, tot
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  do it = 1, 4
    if (rank == nproc - 1) then
      s = compute_slow(4 * n)
    else
      s = compute(n)
    end if
    call MPI_Allreduce(s, tot, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr) ! SITE:f_allreduce
  end do
  if (rank == 0) print '(a,i0,a,f16.12)', 'imbalance.f90: ', nproc, ' ranks, sum ', tot
  call MPI_Finalize(ierr)
end program imbalance
