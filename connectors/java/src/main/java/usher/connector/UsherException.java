package usher.connector;

/** UsherException is a call to usher that got no usable answer. */
public class UsherException extends Exception {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final String code;

    public UsherException(String message, int status, String code, Throwable cause) {
        super(message, cause);
        this.status = status;
        this.code = code;
    }

    public UsherException(String message, Throwable cause) {
        this(message, 0, null, cause);
    }

    /** status is usher's answer's status, 0 when there was none. */
    public int status() {
        return status;
    }

    /** code is usher's error code, if its answer gave one. */
    public String code() {
        return code;
    }
}
