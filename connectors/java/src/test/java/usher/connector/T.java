package usher.connector;

import java.util.Objects;

/**
 * A minimal test runner: named cases, each passing or failing alone, and
 * the closing line "N passed, N failed, N skipped".
 */
public final class T {
    private T() {}

    public static int passed, failed, skipped;

    /** Body is one test case. */
    @FunctionalInterface
    public interface Body {
        void run() throws Exception;
    }

    /** test runs one case and reports it. */
    public static void test(String name, Body b) {
        try {
            b.run();
            passed++;
            System.out.println("ok - " + name);
        } catch (Throwable e) {
            failed++;
            System.out.println("not ok - " + name + ": " + e);
            e.printStackTrace(System.out);
        }
    }

    /** skip reports a case not run, and why. */
    public static void skip(String name, String why) {
        skipped++;
        System.out.println("ok - " + name + " # SKIP " + why);
    }

    public static void eq(Object got, Object want, String what) {
        if (!Objects.equals(got, want)) throw new AssertionError(what + ": got " + got + ", want " + want);
    }

    public static void check(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    /** summary prints the closing line and exits 1 if any case failed. */
    public static void summary() {
        System.out.println(passed + " passed, " + failed + " failed, " + skipped + " skipped");
        System.exit(failed == 0 ? 0 : 1);
    }
}
