! A ring of MPI_Sendrecv calls (8 kB halos to the right, from the left) in Fortran with `use mpi`; every
! rank runs base_work() each step, rank SLOW also runs slow_work(). usage: ring_slow [steps] [units] [extra]
module ring_kernels
  implicit none
contains
  function base_work(x, units) result(r)
    double precision, intent(in) :: x
    integer(8), intent(in) :: units
    double precision :: r
    integer(8) :: i
    r = x
    do i = 0, units * 480000_8 - 1
      r = r * 0.999999d0 + 1.0d0 / (1.0d0 + dble(iand(i, 1023_8)))
    end do
  end function base_work

  function slow_work(x, units) result(r) ! SITE:rs_slow_begin
    double precision, intent(in) :: x
    integer(8), intent(in) :: units
    double precision :: r
    integer(8) :: i
    r = x
    do i = 0, units * 480000_8 - 1
      r = r * 0.999998d0 + 1.0d0 / (2.0d0 + dble(iand(i, 511_8)))
    end do
  end function slow_work ! SITE:rs_slow_end
end module ring_kernels

program ring_slow
  use mpi
  use ring_kernels
  implicit none
  integer, parameter :: n = 1024, slow = 2
  double precision :: out(n), in(n), r
  integer :: rank, size, ierr, steps, left, right, it
  integer(8) :: units, extra
  character(len=32) :: arg
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  steps = 6; units = 10; extra = 80
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg); read (arg, *) steps
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg); read (arg, *) units
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg); read (arg, *) extra
  end if
  left = mod(rank + size - 1, size)
  right = mod(rank + 1, size)
  out = rank
  in = 0
  do it = 1, steps
    r = base_work(in(1), units)
    if (rank == slow) r = r + slow_work(r, extra)
    out(1) = r * 1.0d-9
    call MPI_Sendrecv(out, n, MPI_DOUBLE_PRECISION, right, 5, in, n, MPI_DOUBLE_PRECISION, left, 5, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end do
  if (rank == 0) print '(a,i0,a,es12.4)', 'ring_slow: ', steps, ' steps, ', in(1)
  call MPI_Finalize(ierr)
end program ring_slow
