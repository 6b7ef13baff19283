! A deliberate late sender (Fortran): rank 0 computes DELAY seconds before each
! send to rank 1 (tag 3, 8 integers), which posts its receive at once.
program late_sender
  use mpi
  implicit none
  integer :: rank, ierr, it, iter, data(8)
  double precision :: d, t0, x
  character(len=32) :: arg
  iter = 3
  d = 0.05d0
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iter
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) d
  end if
  data = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  do it = 1, iter
    if (rank == 0) then
      t0 = MPI_Wtime()
      x = 0
      do while (MPI_Wtime() - t0 < d)
        x = x + 1
      end do
      data(1) = it
      call MPI_Send(data, 8, MPI_INTEGER, 1, 3, MPI_COMM_WORLD, ierr) ! SITE:f_late_send
    else if (rank == 1) then
      call MPI_Recv(data, 8, MPI_INTEGER, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr) ! SITE:f_early_recv
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end do
  if (rank == 1) print '(a,i0,a,i0)', 'late_sender.f90: received ', iter, ' messages, last ', data(1)
  call MPI_Finalize(ierr)
end program late_sender
