# numaff's root Makefile: only libnumaff's installation (everything else builds with cargo).
#   make install PREFIX=DIR     libnumaff into DIR/lib, DIR/include, DIR/lib/pkgconfig, DIR/lib/cmake
#   make uninstall PREFIX=DIR
# PROFILE (release or debug), DESTDIR and CARGO_TARGET_DIR are passed on to crates/capi/Makefile.

.PHONY: install uninstall
install uninstall:
	$(MAKE) -C crates/capi $@
