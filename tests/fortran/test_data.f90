! test_data.f90: what the Fortran MPI tests share: the contributions (every rank can make every
! rank's), the MPFR oracle (oracle.c) and the checks. It knows nothing of MPI.
module test_data
    use, intrinsic :: iso_c_binding
    implicit none

    interface
        real(c_double) function oracle_sum64(terms, count) bind(C)
            import :: c_double, c_int
            real(c_double), intent(in) :: terms(*)
            integer(c_int), value :: count
        end function
        real(c_float) function oracle_sum32(terms, count) bind(C)
            import :: c_float, c_int
            real(c_float), intent(in) :: terms(*)
            integer(c_int), value :: count
        end function
        integer(c_int64_t) function oracle_digest(data, bytes) bind(C)
            import :: c_int64_t
            type(*), intent(in) :: data(*)
            integer(c_int64_t), value :: bytes
        end function
    end interface

    integer :: failures = 0

contains

    ! Element i of contribution c of np: 1 on one contribution and 2^-53 on the others, so that
    ! the correctly rounded sum differs from a fold that starts at the 1 (np >= 3), plus a
    ! wide-range term on every third element.
    pure real(8) function value64(c, i, np)
        integer, intent(in) :: c, i, np
        if (mod(i, np) == c) then
            value64 = 1.0d0
        else
            value64 = scale(1.0d0, -53)
        end if
        if (mod(i, 3) == 2) value64 = value64 + scale(real(mod(c*7 + i, 13) - 6, 8), mod(c*5 + i, 60) - 30)
    end function

    pure real(4) function value32(c, i, np)
        integer, intent(in) :: c, i, np
        if (mod(i, np) == c) then
            value32 = 1.0
        else
            value32 = scale(1.0, -24)
        end if
        if (mod(i, 3) == 2) value32 = value32 + scale(real(mod(c*7 + i, 13) - 6, 4), mod(c*5 + i, 20) - 10)
    end function

    ! The contribution this rank brings under rotation `rotation`.
    pure integer function held(rank, rotation, np)
        integer, intent(in) :: rank, rotation, np
        held = mod(rank + rotation, np)
    end function

    subroutine check64(name, result, n, np, shift)
        character(*), intent(in) :: name
        integer, intent(in) :: n, np, shift
        real(8), intent(in) :: result(n)
        real(8) :: terms(64), want
        integer :: i, c
        do i = 1, n
            do c = 1, np
                terms(c) = value64(c - 1, i + shift, np)
            end do
            want = oracle_sum64(terms, np)
            if (transfer(want, 0_8) /= transfer(result(i), 0_8)) then
                failures = failures + 1
                if (failures <= 5) print '(a, a, i0, a, es25.17, a, es25.17)', 'FAIL ', name, &
                    i, ': ', result(i), ' exact ', want
            end if
        end do
    end subroutine

    subroutine check32(name, result, n, np)
        character(*), intent(in) :: name
        integer, intent(in) :: n, np
        real(4), intent(in) :: result(n)
        real(4) :: terms(64), want
        integer :: i, c
        do i = 1, n
            do c = 1, np
                terms(c) = value32(c - 1, i, np)
            end do
            want = oracle_sum32(terms, np)
            if (transfer(want, 0) /= transfer(result(i), 0)) then
                failures = failures + 1
                if (failures <= 5) print '(a, a, i0, a, es16.8, a, es16.8)', 'FAIL ', name, &
                    i, ': ', result(i), ' exact ', want
            end if
        end do
    end subroutine

    ! Rank 0 prints the digest of a result, for the script to compare across runs.
    subroutine report(rank, name, digest)
        integer, intent(in) :: rank
        character(*), intent(in) :: name
        integer(c_int64_t), intent(in) :: digest
        if (rank == 0) print '(a, a, a, z16.16)', 'case ', name, ' ', digest
    end subroutine

end module
